"""Every use of pygls' private names, in one place: `ContainedProtocol` turns the private hooks nagent-lsp needs
into named methods `lsp/server.py` implements, so nothing else in the package touches a pygls name that starts
with an underscore.

What each use is for, and the upstream change that would make it unnecessary, is in docs/pygls-upstream.md;
tests/test_pygls_contract.py fails when pygls changes a name, a signature or a behaviour relied on here
(`PRIVATE_NAMES` lists them). pyproject.toml pins pygls to 2.1.x for the same reason.

The hooks (pygls 2.1):
- requests: `_handle_request` (pygls logs the params and answers a crash with its traceback) → `answer`;
- notifications: `_handle_notification` (pygls files each notification's future in its request table and never
  removes it; `$/cancelRequest` only cancels a request that has not started) → `notification_failed`,
  `cancel_request`;
- the generator handlers pygls' built-in features are written as (initialize, shutdown, didOpen…):
  `_run_generator` files each step's inner task under a fresh id and never removes it (one leaked task per
  request or notification), and lets a cancelled step's CancelledError escape into the event loop's log;
- `workspace/executeCommand` is pygls' generator too: overridden with a coroutine → `execute_command`, so a
  command is one task, filed under its request id, that `$/cancelRequest` can cancel while it runs;
- shutdown: pygls cancels the running requests while iterating the table their callbacks change;
- writing: `_send_data` (pygls logs every body at INFO and drops a message it cannot encode) → `write_message`;
- state read or set: the request table, the result types of the server's own requests, the shutdown flag and
  the request id of the running handler's context.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Generator
from concurrent.futures import Future
from functools import partial
from typing import Any

from lsprotocol import types
from pygls.protocol import LanguageServerProtocol, lsp_method

log = logging.getLogger("nagent_lsp")

MsgId = int | str

# The private names of pygls 2.1 this module uses (tests/test_pygls_contract.py checks each is still there).
PRIVATE_NAMES = {
    "JsonRPCProtocol": (
        "_request_futures",  # attribute: request id -> the future answering it
        "_result_types",  # attribute: id of a request the server sent -> the type of its result
        "_shutdown",  # attribute: set by shutdown; pygls' handle_message drops requests after it
        "_ctx_msg_id",  # attribute: the contextvar behind the public `msg_id`
        "_execute_handler",
        "_handle_request",
        "_handle_notification",
        "_run_generator",
        "_send_data",
    ),
}


class ContainedProtocol(LanguageServerProtocol):
    """pygls' LSP protocol with its private hooks routed to the named methods below (see the module docstring)."""

    # -- what a subclass implements -------------------------------------------------------------------------

    def answer(self, msg_id: MsgId, method: str, future: Future[Any]) -> None:
        """Answer request `msg_id` from its handler's finished (or cancelled) future."""
        raise NotImplementedError

    def request_failed(self, msg_id: MsgId, method: str, error: Exception) -> None:
        """A handler could not even be started: answer `msg_id` with an error."""
        raise NotImplementedError

    def notification_failed(self, method: str, error: BaseException) -> None:
        raise NotImplementedError

    def write_message(self, data: Any) -> None:
        """Write one outgoing message (a response, a notification, a server request) to the client."""
        raise NotImplementedError

    async def execute_command(self, params: types.ExecuteCommandParams) -> Any:
        raise NotImplementedError

    # -- reading and setting pygls' state -------------------------------------------------------------------

    def request_future(self, msg_id: Any) -> Future[Any] | None:
        return self._request_futures.get(msg_id)

    def forget_request(self, msg_id: Any) -> Future[Any] | None:
        return self._request_futures.pop(msg_id, None)

    def running_requests(self) -> list[tuple[MsgId, Future[Any]]]:
        return list(self._request_futures.items())

    def result_type(self, msg_id: Any) -> Any:
        """The result type of the server's own request `msg_id` (forgotten once asked), or None."""
        return self._result_types.pop(msg_id, None)

    @property
    def shutting_down(self) -> bool:
        return self._shutdown

    def cancel_request(self, msg_id: Any) -> None:
        """`$/cancelRequest`: the request's future is its task (every handler here is a coroutine, a thread or a
        generator whose result future pygls cancels), so it stops even while it runs."""
        future = self._request_futures.pop(msg_id, None)
        if future is not None and not future.done():
            future.cancel()

    # -- pygls' private hooks -------------------------------------------------------------------------------

    def _handle_request(self, msg_id: MsgId, method_name: str, params: Any) -> None:
        try:
            handler = self.fm.builtin_features.get(method_name) or self.fm.features[method_name]
            self._ctx_msg_id.set(msg_id)  # what the public `msg_id` reads inside the handler
            self._execute_handler(
                msg_id=msg_id,
                handler=handler,
                args=(params,),
                callback=partial(self._request_done, msg_id=msg_id, method=method_name),
            )
        except Exception as error:
            self._request_futures.pop(msg_id, None)
            self.request_failed(msg_id, method_name, error)

    def _request_done(self, future: Future[Any], *, msg_id: MsgId, method: str) -> None:
        self._request_futures.pop(msg_id, None)
        self.answer(msg_id, method, future)

    def _handle_notification(self, method_name: str, params: Any) -> None:
        if method_name == types.CANCEL_REQUEST:
            self.cancel_request(params.id)
            return
        handler = self.fm.builtin_features.get(method_name) or self.fm.features.get(method_name)
        if handler is None:
            return
        key = f"notification:{uuid.uuid4()}"
        try:
            self._execute_handler(
                msg_id=key,
                handler=handler,
                args=(params,),
                callback=partial(self._notification_done, method=method_name, key=key),
            )
        except Exception as error:
            self._request_futures.pop(key, None)
            self.notification_failed(method_name, error)

    def _notification_done(self, future: Future[Any], *, method: str, key: str) -> None:
        self._request_futures.pop(key, None)
        if not future.cancelled() and (error := future.exception()) is not None:
            self.notification_failed(method, error)

    def _run_generator(
        self, future: Future[Any] | None, *, gen: Generator[Any, Any, Any], result_future: Future[Any]
    ) -> None:
        """pygls' generator step, with each step's task removed from the request table once it is done (pygls
        leaves it there for ever) and a cancelled step cancelling the result instead of raising in the loop."""
        if result_future.cancelled() or (future is not None and future.cancelled()):
            gen.close()
            if not result_future.done():
                result_future.cancel()
            return
        try:
            value = future.result() if future is not None else None
            handler, args, kwargs = gen.send(value)
        except StopIteration as stop:
            result_future.set_result(stop.value)
            return
        except Exception as exc:
            result_future.set_exception(exc)
            return
        key = f"step:{uuid.uuid4()}"
        try:
            self._execute_handler(
                key,
                handler,
                args=args,
                kwargs=kwargs,
                callback=partial(self._step_done, key=key, gen=gen, result_future=result_future),
            )
        except Exception as exc:
            self._request_futures.pop(key, None)
            result_future.set_exception(exc)

    def _step_done(
        self, future: Future[Any], *, key: str, gen: Generator[Any, Any, Any], result_future: Future[Any]
    ) -> None:
        self._request_futures.pop(key, None)
        self._run_generator(future, gen=gen, result_future=result_future)

    def _send_data(self, data: Any) -> None:
        self.write_message(data)

    # -- built-in features pygls writes as generators ---------------------------------------------------------

    @lsp_method(types.WORKSPACE_EXECUTE_COMMAND)
    async def lsp_workspace__execute_command(  # type: ignore[override]  # a coroutine where pygls has a generator
        self, params: types.ExecuteCommandParams
    ) -> Any:
        # Same name as pygls' built-in generator, so this coroutine replaces it (pygls registers by method name).
        return await self.execute_command(params)

    @lsp_method(types.SHUTDOWN)
    def lsp_shutdown(self, *args: Any) -> Generator[Any, Any, None]:
        """pygls' shutdown, cancelling a snapshot of the running requests (a cancelled future's callback drops
        its own entry while pygls would still be iterating over them)."""
        if (user_handler := self.fm.features.get(types.SHUTDOWN)) is not None:
            yield user_handler, args, None
        current_id = self.msg_id
        for msg_id, future in list(self._request_futures.items()):
            if msg_id != current_id and not future.done():
                future.cancel()
        self._shutdown = True
        return None


def request_table(protocol: LanguageServerProtocol) -> dict[Any, Future[Any]]:
    """pygls' table of running requests (read by tests: a finished entry left in it is a leak)."""
    return protocol._request_futures
