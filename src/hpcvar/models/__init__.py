"""Models: bandwidth sharing (scheme language, gige / myrinet / maxmin, fitting)."""
