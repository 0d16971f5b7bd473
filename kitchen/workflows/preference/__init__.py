"""Preference learning (DPO): comparisons -> (chosen, rejected) pairs -> DPO steps against a
frozen reference."""

from kitchen.workflows.preference.config import PreferenceConfig
from kitchen.workflows.preference.state import PreferenceState
from kitchen.workflows.preference.workflow import preference, preference_parts

__all__ = ["PreferenceConfig", "PreferenceState", "preference", "preference_parts"]
