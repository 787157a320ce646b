"""The SDK's error hierarchy.

Library code raises these; only the CLI turns them into exit codes. Every message names
what is at fault (plugin, hook, file and line, config key, reward) so a user can act on it
without a traceback.
"""

from __future__ import annotations


class StudioAlignError(Exception):
    """Base class of every error the SDK raises on purpose."""


class ConfigError(StudioAlignError):
    """A config file or `--set` override is invalid; the message names the key."""


class PluginError(StudioAlignError):
    """A plugin failed to load, registered something invalid or a duplicate, or raised in a hook."""


class RewardError(StudioAlignError):
    """A reward raised, returned the wrong length, or returned NaN; the message names it."""


class DataError(StudioAlignError):
    """Input data (logs, datasets, images) is invalid; the message names the file and line."""


class CheckpointError(StudioAlignError):
    """A checkpoint is missing, incomplete or incompatible."""


class ModelLoadError(StudioAlignError):
    """A base model could not be loaded: unsupported architecture, missing or mismatched weight."""


class TrainingError(StudioAlignError):
    """Training diverged (a non-finite loss or gradient); nothing after it is saved."""


class QualityGateError(StudioAlignError):
    """A trained model is below the configured quality floor and is refused for further use."""
