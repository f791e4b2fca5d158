"""The one settings class. Built once (app factory or CLI) and passed in; nothing else reads
the environment.

A bad or missing value stops the process at start with one line naming the variable
(``settings_from_env``); it never turns into 401s at run time.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from app.errors import ConfigError
from app.origins import OriginAllowlist, OriginError, parse_url
from app.push_targets import PushTargets

DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///./looping-edge.db"


class Settings(BaseSettings):
    """Every knob of the edge. Env var names are given by the aliases."""

    model_config = SettingsConfigDict(
        env_prefix="EDGE_",
        case_sensitive=False,
        extra="ignore",
        populate_by_name=True,
        # "inf" and "nan" parse as floats: no duration, budget or age may be one (an infinite
        # retention overflowed the purge's date arithmetic, which then never ran).
        allow_inf_nan=False,
    )

    # --- identity of this edge ---------------------------------------------------------------
    signing_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("A2A_SIGNING_KEY")
    )
    signing_key_file: Path | None = Field(
        default=None, validation_alias=AliasChoices("A2A_SIGNING_KEY_FILE")
    )
    gateway_origins: Annotated[list[str], NoDecode] = Field(
        default_factory=list, validation_alias=AliasChoices("GATEWAY_ORIGINS")
    )
    # Other agents' edges whose caller tokens open tenants accept (CONTRACT §10): the same
    # format and rules as GATEWAY_ORIGINS, kept apart from it so a peer never poses as the
    # gateway (an origin may not be in both lists).
    peer_origins: Annotated[list[str], NoDecode] = Field(
        default_factory=list, validation_alias=AliasChoices("PEER_ORIGINS")
    )
    public_url: str = Field(default="", validation_alias=AliasChoices("PUBLIC_URL"))
    database_url: str = Field(
        default=DEFAULT_DATABASE_URL, validation_alias=AliasChoices("DATABASE_URL")
    )
    # Connections kept open per process (PostgreSQL); opened on demand, so a large value costs
    # nothing idle. Sized for the expected concurrency: beyond it, overflow connections are
    # opened and closed per burst, which costs a measurable share of a GetTask's CPU.
    db_pool_size: int = Field(default=32, ge=1, le=1000)

    # --- wire --------------------------------------------------------------------------------
    rpc_path: str = "/a2a"
    # The gRPC binding (A2A §10, issue 49) listens on its own plaintext port; off when unset.
    grpc_port: int | None = Field(default=None, ge=1, le=65535)
    jwks_path: str = "/.well-known/jwks.json"
    identity_claim: str = "https://loopingai.org/identity"
    tenant_claim: str = "https://loopingai.org/tenant"
    allow_loopback_http: bool = False
    max_body_bytes: int = Field(default=65536, ge=1024, le=16 * 1024 * 1024)
    # The body limit for a tenant whose llm agent accepts images (issue 55), applied after the
    # token and its tenant are verified; every other tenant keeps max_body_bytes.
    max_image_body_bytes: int = Field(default=6 * 1024 * 1024, ge=1024, le=64 * 1024 * 1024)
    # The same for a tenant whose llm agent accepts documents.
    max_document_body_bytes: int = Field(default=12 * 1024 * 1024, ge=1024, le=64 * 1024 * 1024)
    # A PDF is read in a child process (app/attachments/pdf.py): killed past this deadline,
    # its address space capped at pdf_memory_bytes.
    pdf_deadline_seconds: float = Field(default=15.0, gt=0, le=300)
    pdf_memory_bytes: int = Field(
        default=256 * 1024 * 1024, ge=64 * 1024 * 1024, le=16 * 1024 * 1024 * 1024
    )
    # Requests whose body may pass max_body_bytes (attachments) are read and handled at most
    # this many at once per process, at most max_large_bodies_per_tenant for one tenant; one
    # that waits longer than large_body_wait_seconds for its turn is refused with 429
    # (app/attachments/admission.py): the edge's memory stays bounded whatever is sent.
    max_large_bodies: int = Field(default=4, ge=1, le=256)
    max_large_bodies_per_tenant: int = Field(default=2, ge=1, le=256)
    large_body_wait_seconds: float = Field(default=10.0, ge=0, le=300)
    max_token_bytes: int = Field(default=8192, ge=512, le=65536)
    clock_skew_seconds: int = Field(default=30, ge=0, le=600)
    max_token_lifetime_seconds: int = Field(default=300, ge=1, le=86400)

    # --- HTTP connections (app/http/connection.py, docs/http-limits.md) -------------------------
    # The request line plus header fields. A gateway's request head is well under 16 KiB
    # (its token is bounded by max_token_bytes); 64 KiB is the most a head may hold in memory.
    max_header_bytes: int = Field(default=32768, ge=16384, le=65536)
    # Totals, not gaps between bytes: the head within this of the connection's start or of the
    # previous response, the body within body_timeout_seconds of the head.
    header_timeout_seconds: float = Field(default=10.0, gt=0, le=300)
    body_timeout_seconds: float = Field(default=30.0, gt=0, le=600)
    # An idle keep-alive connection is closed after this (uvicorn's timeout_keep_alive).
    keep_alive_seconds: int = Field(default=5, ge=1, le=300)
    # Open connections per process; past it a request is answered 503 and its connection closed.
    max_connections: int = Field(default=1000, ge=1, le=1_000_000)

    # --- gateway JWKS fetching (CONTRACT §3 step 5) ---------------------------------------------
    jwks_cache_seconds: float = Field(default=600.0, gt=0)
    jwks_cooldown_seconds: float = Field(default=30.0, ge=0)
    jwks_deadline_seconds: float = Field(default=3.0, gt=0, le=60)
    jwks_max_bytes: int = Field(default=65536, ge=1024, le=1024 * 1024)

    # --- stub card ----------------------------------------------------------------------------
    card_name: str = "looping-edge"
    card_description: str = "A2A edge serving agents behind one endpoint."
    card_version: str = "0.1.0"
    card_max_age_seconds: int = Field(default=300, ge=0)

    # --- tenants ------------------------------------------------------------------------------
    tenant_refresh_seconds: float = Field(default=2.0, gt=0, le=300)

    # --- durable turns ------------------------------------------------------------------------
    worker_concurrency: int = Field(default=16, ge=1, le=1024)
    lease_seconds: float = Field(default=30.0, ge=1, le=3600)
    poll_seconds: float = Field(default=1.0, gt=0, le=60)
    turn_max_attempts: int = Field(default=3, ge=1, le=100)
    turn_retry_base_seconds: float = Field(default=1.0, ge=0)
    turn_timeout_seconds: float = Field(default=600.0, gt=0)
    failure_text: str = "The agent could not complete this turn. Please try again."
    blocking_timeout_seconds: float = Field(default=30.0, gt=0, le=600)
    # An identity's unfinished new-task turns (queued or running); past it SendMessage for a
    # new task answers 429 with Retry-After (continuations never count). 0: no bound.
    max_queued_turns_per_identity: int = Field(default=32, ge=0, le=100_000)
    queue_full_retry_after_seconds: int = Field(default=10, ge=1, le=3600)
    task_retention_days: float = Field(default=30.0, gt=0, le=36500)
    default_history_length: int = Field(default=50, ge=0, le=1000)

    # --- streaming (SendStreamingMessage, SubscribeToTask over SSE) --------------------------
    # Open streams per caller (tenant, identity) and per process; past either the call is
    # refused before streaming starts (-32000, docs/protocol.md). A stream holds a connection
    # of EDGE_MAX_CONNECTIONS for as long as it lasts.
    stream_max_per_identity: int = Field(default=8, ge=1, le=100_000)
    stream_max_per_process: int = Field(default=500, ge=1, le=1_000_000)
    # An SSE comment line after this long without an event, so proxies keep the stream open.
    stream_heartbeat_seconds: float = Field(default=15.0, gt=0, le=300)
    # How often a stream re-reads its task's event log where no notification is heard (SQLite);
    # on PostgreSQL LISTEN wakes it and EDGE_POLL_SECONDS is the fallback.
    stream_poll_seconds: float = Field(default=0.2, gt=0, le=60)

    # --- push delivery ------------------------------------------------------------------------
    push_timeout_seconds: float = Field(default=10.0, gt=0, le=120)
    push_retry_budget_seconds: float = Field(default=3600.0, gt=0)
    push_retry_base_seconds: float = Field(default=1.0, gt=0)
    push_retry_max_seconds: float = Field(default=300.0, gt=0)
    push_unauthorized_retries: int = Field(default=3, ge=0, le=20)
    push_concurrency: int = Field(default=16, ge=1, le=1024)
    push_secret_key: SecretStr | None = None
    # EDGE_PUSH_ALLOW_PRIVATE_TARGETS: development and tests only. Lifts the SSRF address rule
    # for open tenants' push targets (loopback, private, link-local ... become reachable, and
    # plain http to such addresses); logged as a warning at start (app.push_targets).
    push_allow_private_targets: bool = False

    # --- A2A peers of llm agents (issue 54, app.peers, docs/agents-peers.md) ---------------
    # The longest an a2a tool waits for a peer's task to settle (a2a_send / a2a_get_task with
    # wait); past it the tool answers with the task as it stands. Also bounded by the agent's
    # tool_timeout_seconds.
    peer_wait_seconds: float = Field(default=50.0, gt=0, le=3600)
    # One request to a peer (card, send, read, cancel), connection and every byte included.
    peer_request_seconds: float = Field(default=20.0, gt=0, le=600)
    # How often a task is read again while waiting on a peer that does not stream.
    peer_poll_seconds: float = Field(default=1.0, gt=0, le=60)
    # The largest answer read from a peer (a stream counts as a whole); past it the call fails
    # with RESPONSE_TOO_LARGE. What reaches the model is bounded far below (32 KiB of text).
    peer_max_response_bytes: int = Field(
        default=16 * 1024 * 1024, ge=64 * 1024, le=256 * 1024 * 1024
    )

    # --- ops ----------------------------------------------------------------------------------
    log_level: str = "INFO"
    log_json: bool = True
    # EDGE_OPENAPI_DOCS: serve FastAPI's /docs and /openapi.json (operational routes only; the
    # JSON-RPC methods are not described there). Off by default: CONTRACT §2 answers 404 to
    # every path it does not list, and a public edge has no use for a schema browser.
    openapi_docs: bool = False

    # --- tracing (OpenTelemetry, issue 53; app/tracing, docs/observability.md) ----------------
    # Off unless an OTLP endpoint is set. The standard variables keep their standard names;
    # the SDK reads the others it knows (OTEL_TRACES_SAMPLER, OTEL_BSP_*) itself, once, when
    # the tracer provider is made at start.
    otel_endpoint: str | None = Field(
        default=None, validation_alias=AliasChoices("OTEL_EXPORTER_OTLP_ENDPOINT")
    )
    otel_traces_endpoint: str | None = Field(
        default=None, validation_alias=AliasChoices("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )
    # "key=value,key2=value2" sent with every export (a collector's API key, say).
    otel_headers: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("OTEL_EXPORTER_OTLP_HEADERS")
    )
    otel_service_name: str = Field(
        default="looping-edge", validation_alias=AliasChoices("OTEL_SERVICE_NAME")
    )
    otel_sdk_disabled: bool = Field(
        default=False, validation_alias=AliasChoices("OTEL_SDK_DISABLED")
    )
    # EDGE_TRACE_MODEL_CONTENT: model call spans carry the prompt and the answer
    # (gen_ai.input.messages / gen_ai.output.messages). Off: never any prompt text.
    trace_model_content: bool = False

    # --- admin API (issue 52) -------------------------------------------------------------------
    # EDGE_ADMIN_LISTEN: host:port of the admin listener (app.admin), e.g. 127.0.0.1:8081 or
    # [::1]:8081; unset: no admin listener. Never on the public port.
    admin_listen: str | None = None

    @field_validator("admin_listen")
    @classmethod
    def _host_port(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        listen_address(value)
        return value.strip()

    @property
    def traces_endpoint(self) -> str | None:
        """Where spans are posted (OTLP/HTTP), or None: tracing is off. The signal-specific
        variable is used as given; the general one gets ``/v1/traces`` (OTLP exporter spec)."""
        if self.otel_sdk_disabled:
            return None
        if self.otel_traces_endpoint:
            return self.otel_traces_endpoint
        if self.otel_endpoint:
            return self.otel_endpoint.rstrip("/") + "/v1/traces"
        return None

    @property
    def admin_address(self) -> tuple[str, int] | None:
        """``EDGE_ADMIN_LISTEN`` as (host, port), or ``None`` when it is off."""
        return None if self.admin_listen is None else listen_address(self.admin_listen)

    @field_validator("gateway_origins", "peer_origins", mode="before")
    @classmethod
    def _split_origins(cls, value: object) -> object:
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                try:
                    return json.loads(text)
                except json.JSONDecodeError:
                    raise ValueError("must be a JSON array of origins or one origin") from None
            if "," in text:
                raise ValueError(
                    'several origins are a JSON array: ["https://a.example","https://b.example"]'
                )
            return [text]
        return value

    @field_validator("log_level")
    @classmethod
    def _known_level(cls, value: str) -> str:
        level = value.strip().upper()
        if level not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
            raise ValueError("must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL")
        return level

    @field_validator("push_secret_key")
    @classmethod
    def _long_enough(cls, value: SecretStr | None) -> SecretStr | None:
        # The key material of the push-secret encryption (HKDF input): at least 16 bytes.
        text = "" if value is None else value.get_secret_value()
        if text.strip() and len(text.encode()) < 16:
            raise ValueError("must be at least 16 bytes (e.g. openssl rand -base64 32)")
        return value

    @field_validator("rpc_path", "jwks_path")
    @classmethod
    def _absolute_path(cls, value: str) -> str:
        if not value.startswith("/") or "?" in value or "#" in value or value.endswith("/"):
            raise ValueError("must be an absolute path like /a2a (no query, no trailing slash)")
        return value

    # --- derived values -------------------------------------------------------------------------

    @property
    def public_origin(self) -> str:
        return parse_url(self.public_url, allow_loopback_http=True).origin

    @property
    def endpoint_url(self) -> str:
        """The audience of gateway tokens and the card's interface URL (CONTRACT §2)."""
        return self.public_origin + self.rpc_path

    @property
    def jwks_url(self) -> str:
        return self.public_origin + self.jwks_path

    @property
    def push_targets(self) -> PushTargets:
        """The rules for push URLs (``app.push_targets``)."""
        return PushTargets(self.allowlist, allow_private=self.push_allow_private_targets)

    @property
    def allowlist(self) -> OriginAllowlist:
        return OriginAllowlist.from_entries(
            self.gateway_origins, allow_loopback_http=self.allow_loopback_http
        )

    @property
    def peer_allowlist(self) -> OriginAllowlist:
        """``PEER_ORIGINS`` (may be empty: then no peer token is ever accepted)."""
        return OriginAllowlist.from_entries(
            self.peer_origins, allow_loopback_http=self.allow_loopback_http, required=False
        )

    def signing_key_json(self) -> str:
        """The private JWK text, from ``A2A_SIGNING_KEY`` or ``A2A_SIGNING_KEY_FILE``."""
        if self.signing_key is not None and self.signing_key.get_secret_value().strip():
            return self.signing_key.get_secret_value()
        if self.signing_key_file is not None:
            try:
                return self.signing_key_file.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                raise ConfigError(
                    "A2A_SIGNING_KEY_FILE: cannot read the key file", reason="config"
                ) from None
        raise ConfigError(
            "A2A_SIGNING_KEY: required (or A2A_SIGNING_KEY_FILE); generate one with looping-keys"
        )

    def validate_for_serving(self) -> None:
        """The checks that need more than one field; raise ``ConfigError`` naming the variable."""
        if not self.public_url:
            raise ConfigError("PUBLIC_URL: required (e.g. https://edge.example.com)")
        try:
            parsed = parse_url(self.public_url, allow_loopback_http=True)
        except OriginError as exc:
            raise ConfigError(f"PUBLIC_URL: {exc}") from None
        if parsed.path not in ("", "/") or "?" in self.public_url or "#" in self.public_url:
            raise ConfigError("PUBLIC_URL: must be scheme://host[:port] with no path or query")
        try:
            self.allowlist  # noqa: B018 - validation side effect
        except OriginError as exc:
            raise ConfigError(f"GATEWAY_ORIGINS: {exc}") from None
        try:
            peers = self.peer_allowlist
        except OriginError as exc:
            raise ConfigError(f"PEER_ORIGINS: {exc}") from None
        shared = peers.origins & self.allowlist.origins
        if shared:
            # A token from such an origin could be read either way: refuse the ambiguity.
            raise ConfigError(
                f"PEER_ORIGINS: {sorted(shared)[0]} is also in GATEWAY_ORIGINS; "
                "a peer is never a gateway"
            )


def listen_address(value: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port`` for an IPv6 address) as (host, port); ``ValueError``
    otherwise."""
    host, sep, port = value.strip().rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError("must be host:port, e.g. 127.0.0.1:8081 or [::1]:8081")
    if any(c.isspace() or c in "/[]@" for c in host):
        raise ValueError("must be host:port, e.g. 127.0.0.1:8081 or [::1]:8081")
    return host, int(port)


def _variable_name(loc: tuple[int | str, ...]) -> str:
    field = str(loc[0]) if loc else "?"
    for name, info in Settings.model_fields.items():
        alias = info.validation_alias
        if isinstance(alias, AliasChoices) and field in (name, *map(str, alias.choices)):
            return str(alias.choices[0])
    return f"EDGE_{field.upper()}"


# The environment variables the edge's own settings read besides ``EDGE_*``: its key, its
# database, its origins, its tracing. None of them is a credential for another party.
_ALIASES = frozenset(
    str(choice).upper()
    for info in Settings.model_fields.values()
    if isinstance(info.validation_alias, AliasChoices)
    for choice in info.validation_alias.choices
)


# Every variable the settings read: ``EDGE_<field>`` for a field without an alias, and the aliases.
SETTING_VARIABLES = _ALIASES | frozenset(
    f"EDGE_{name.upper()}"
    for name, info in Settings.model_fields.items()
    if not isinstance(info.validation_alias, AliasChoices)
)


def is_edge_variable(name: str) -> bool:
    """Whether ``name`` is, or may one day be, an environment variable of the edge's own
    settings (any ``EDGE_*``, ``A2A_SIGNING_KEY``, ``DATABASE_URL``...): an agent's config may
    never name one as a credential to send elsewhere."""
    upper = name.upper()
    return upper.startswith("EDGE_") or upper in _ALIASES


def load_settings(**overrides: Any) -> Settings:
    """Build settings from the environment (plus explicit overrides, for tests).

    Raises ``ConfigError`` with one line naming the variable.
    """
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        first = exc.errors()[0]
        message = str(first["msg"]).removeprefix("Value error, ")
        raise ConfigError(f"{_variable_name(first['loc'])}: {message}") from None
