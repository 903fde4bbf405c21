"""Helpers the tests share: review builders, tools, stand-ins, schema checks."""
