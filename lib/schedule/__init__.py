"""Reminders and scheduled tasks: when they run, in whose time zone, and where they are kept.

`times` reads what a person or the model says ("in 20 minutes", "tomorrow at 9", an ISO time,
"every 15 minutes", a cron expression) in their time zone and finds each next run across DST
changes; `plan` decides what a due task does now (late, caught up, skipped); `store` is the
SQL, with the limits; `describe` says a task in words. Firing goes through the inbox
(lib/inbox/scheduler.py); running a fired task is the channel's (lib/telegram/scheduled.py).
"""
