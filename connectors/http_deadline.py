"""A deadline for an HTTP answer's status line and headers (connectors/http_json.py's pool).

urllib3 bounds each read of a socket, not the headers as a whole: http.client reads them line
by line with blocking reads, so a server sending a byte every few seconds holds a request as
long as it likes within any `timeout`. Here a connection's `getresponse` is given the read
timeout urllib3 set for it (under `Timeout(total=...)`, what is left of the total) as its
deadline: a timer shuts the socket down when it passes, and the read it stops is raised as a
socket timeout, which urllib3 reports as the read timeout it is (retried as one; said as a server
too slow, not one it cannot reach).
"""

from __future__ import annotations

import http.client
import socket
import threading
from functools import cache
from typing import Any


class HeadersByDeadline(http.client.HTTPConnection):
    """Put between urllib3's connection and http.client's (the classes `_pool_classes` makes):
    urllib3's getresponse calls this one, which stops http.client's reads at the deadline before
    urllib3 parses what came (headers cut short would be logged as a warning with a traceback)."""

    def getresponse(self) -> Any:
        limit = self.timeout if isinstance(self.timeout, (int, float)) else None
        if limit is None or self.sock is None:
            return super().getresponse()
        sock, cut = self.sock, threading.Event()

        def _cut() -> None:
            cut.set()
            try:
                socket.socket.shutdown(sock, socket.SHUT_RDWR)  # the raw socket's: TLS's own would drop its state
            except OSError:
                pass  # already closed

        timer = threading.Timer(limit, _cut)
        timer.daemon = True
        timer.start()
        try:
            response = super().getresponse()
        except Exception as exc:
            if cut.is_set():
                raise socket.timeout(f"the headers did not all come in {limit:g} s") from exc
            raise
        finally:
            timer.cancel()
        if cut.is_set():  # what came before the cut may parse as headers cut short
            response.close()
            raise socket.timeout(f"the headers did not all come in {limit:g} s")
        return response


def bounded(pool: Any) -> Any:
    """The urllib3 PoolManager `pool`, its connections' headers bounded as the module says."""
    pool.pool_classes_by_scheme = _pool_classes()
    return pool


@cache
def _pool_classes() -> dict[str, type]:
    from urllib3 import connection, connectionpool

    class Http(connection.HTTPConnection, HeadersByDeadline):  # MRO: urllib3's, HeadersByDeadline, http.client's
        pass

    class Https(connection.HTTPSConnection, HeadersByDeadline):
        pass

    class HttpPool(connectionpool.HTTPConnectionPool):
        ConnectionCls = Http

    class HttpsPool(connectionpool.HTTPSConnectionPool):
        ConnectionCls = Https

    return {"http": HttpPool, "https": HttpsPool}
