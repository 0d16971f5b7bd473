"""One exception hierarchy; the CLI maps each kind to an exit code (usage/config/data 2, runtime 1)."""

from __future__ import annotations


class KitchenError(Exception):
    """Base of every error Kitchen raises on purpose. Its message is one line a person can act on."""

    exit_code = 1


class ConfigError(KitchenError):
    """A config field, flag or recipe name is wrong."""

    exit_code = 2


class DataError(KitchenError):
    """A dataset file or row is malformed; the message names file:line and field."""

    exit_code = 2


class BackendError(KitchenError):
    """The training backend failed or refused a request."""


class StageError(KitchenError):
    """A stage failed at run time; the message names the stage path."""


class GraphError(ConfigError):
    """A workflow failed validation before anything ran."""
