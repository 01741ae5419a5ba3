"""Formats: where tensors come from. Each module imports its dependency lazily and returns a
``Checkpoint`` (config + named tensors) for a family, or a ``HeadWeights`` directly."""
