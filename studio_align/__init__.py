"""studio-align: alignment SDK for creative platforms.

Creator logs in, tuned models out: reward plugins (pluggy), JAX preference and RL
training (flax NNX, optax, orbax), an intent router and vertical generation models.
"""

__version__ = "0.1.0"
