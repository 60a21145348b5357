"""Who may do what: the standard roles for people (Django groups) and the permission each API
operation needs (the table in docs/api.md, read from the views by `fleet.core.permissions`)."""
