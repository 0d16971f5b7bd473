import logging

from kitchen.engine.secrets import REDACTED, ScrubSecrets, secret_values


def test_any_variable_named_as_a_key_is_scrubbed(monkeypatch):
    monkeypatch.setenv("MY_GRADER_API_KEY", "sk-grader-value-0123")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-value-4567")
    monkeypatch.setenv("GRADER_MODEL", "a-model-name-not-secret")
    values = secret_values()
    assert {"sk-grader-value-0123", "sk-openai-value-4567"} <= set(values)
    assert "a-model-name-not-secret" not in values
    record = logging.LogRecord(
        "x", logging.INFO, __file__, 1, "calling with %s", ("sk-grader-value-0123",), None
    )
    ScrubSecrets().filter(record)
    assert record.getMessage() == f"calling with {REDACTED}"
