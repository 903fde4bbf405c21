"""The translation core: rule cases, legacy rules, decision, encoder, properties."""
