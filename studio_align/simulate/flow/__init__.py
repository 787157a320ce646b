"""The flow vertical's simulated platform: creators with a hidden taste over key and
composition (`creators`), and the selection rounds they take part in (`selections`)."""
