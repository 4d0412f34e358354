-- m013_auth_failures_in_memory: failed sign-ins are counted by the one limit on failed
-- authentications (lib/auth_limit.py), in memory, with the admin API's and /mcp's: the admin
-- guard runs on the event loop and may not wait on the database.
DROP TABLE ui_signin_failures;
