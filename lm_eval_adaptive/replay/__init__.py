"""An OpenAI-compatible endpoint replaying recorded real outputs (offline tests and demos)."""
