"""Documents sent in Telegram, for tests: the recorded document update carrying a test's file, and
a Bot API that serves files by file_id as Telegram does."""

from __future__ import annotations

import copy
import json

import httpx
import respx

from tests.support.telegram import API, GROUP, TOKEN, load

BOT_NAME = "el_mon_test_bot"  # tests/fixtures/telegram/getMe_ok.json


def document_update(
    update_id: int,
    *,
    name: str,
    mime: str,
    size: int | None,
    caption: str | None = None,
    file_id: str | None = None,
) -> dict:
    """The docs' document example (update_document_docs_example.json) brought up to today's Bot
    API (the sender's `is_bot`, the file's `file_unique_id`), carrying the test's file."""
    update = copy.deepcopy(load("update_document_docs_example.json"))
    update["update_id"] = update_id
    message = update["message"]
    message["message_id"] = update_id
    message["from"]["is_bot"] = False
    file_id = file_id or f"doc-{update_id}"
    message["document"].update(file_id=file_id, file_unique_id=f"uniq-{file_id}", file_name=name, mime_type=mime)
    if size is None:
        del message["document"]["file_size"]
    else:
        message["document"]["file_size"] = size
    if caption is not None:
        message["caption"] = caption
    return update


def in_group(update: dict, sender: int, chat_id: int = GROUP) -> dict:
    """The update as sent in a group (GROUP unless `chat_id`) by `sender`, its caption addressed
    to the bot by @mention."""
    message = update["message"]
    message["chat"] = {"id": chat_id, "type": "supergroup", "title": "Family"}
    message["from"] = {"id": sender, "is_bot": False, "first_name": "Bo"}
    message["caption_entities"] = [{"offset": 0, "length": len(BOT_NAME) + 1, "type": "mention"}]
    return update


class Files:
    """Serves files as Telegram does: getFile (getFile_ok.json's shape) by file_id, then the download."""

    def __init__(self, router: respx.MockRouter):
        self.files: dict[str, bytes] = {}
        self.asked: list[str] = []
        router.route(method="POST", url=f"{API}/bot{TOKEN}/getFile").mock(side_effect=self._get_file)
        router.route(method="GET", url__startswith=f"{API}/file/bot{TOKEN}/documents/").mock(side_effect=self._download)

    def serve(self, file_id: str, data: bytes) -> None:
        self.files[file_id] = data

    def _get_file(self, request: httpx.Request) -> httpx.Response:
        file_id = json.loads(request.content)["file_id"]
        self.asked.append(file_id)
        answer = copy.deepcopy(load("getFile_ok.json"))
        answer["result"].update(
            file_id=file_id,
            file_unique_id=f"uniq-{file_id}",
            file_size=len(self.files[file_id]),
            file_path=f"documents/{file_id}",
        )
        return httpx.Response(200, json=answer)

    def _download(self, request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=self.files[request.url.path.rsplit("/", 1)[1]])
