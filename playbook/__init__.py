"""PLAYBOOK.md compiler: a pure function from entries to Markdown. Imports only grimoire.records."""
