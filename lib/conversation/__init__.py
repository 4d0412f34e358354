"""The conversation, whatever channel carries it: who may talk (access.py), the slash commands
and their buttons (commands.py, with /model, /reminders and /why in modules of their own), and
what they answer, as plain data (replies.py: text and rows of buttons).

It knows no channel: Telegram (lib/telegram/) and `ash chat` (lib/commands/chat_*.py) are two
adapters that render a Reply and hand back a press (the `conversation-knows-no-channel` contract
in pyproject.toml). The agent's turn, which answers everything else, is lib.agent.
"""
