"""Generated gRPC stubs; run `make proto` to refresh."""
