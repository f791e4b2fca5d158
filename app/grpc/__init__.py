"""The A2A gRPC binding (A2A 1.0 §10): a grpc.aio server in front of the same dispatcher,
token rules and tenant rules as the JSON-RPC endpoint."""
