"""What text is let in as: secrets redacted before it is embedded or stored, instructions
marked as such so they never become rules.

- ``redact``: ``privacy.redact`` (off by default) removes the chosen kinds (e-mail
  addresses, phone numbers, API keys and tokens, private keys, seed phrases, IBANs) from
  an episode's text and fields and an entry's content, replacing each with
  ``[redacted:KIND]``; built on phonenumbers, schwifty, detect-secrets and mnemonic;
- ``instructions``: a pattern detector for text that instructs a model (overrides of
  earlier instructions, role prompts, tool-call syntax), computed from the text alone.

Pure functions over strings and the config: may import records, config and errors; no
store, no method, no curator.
"""
