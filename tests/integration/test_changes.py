"""SPEC section 8: the change feed over raw sockets (1 and 3 shards: run_integration.py runs both)."""

import json
import os
import re
import signal
import socket
import threading
import time
import unittest

from percore_client import (Server, ServerTestCase, bearer, build_request, env_shards, q, start_server,
                            stats_total, unique, wait_until)

CURSOR = re.compile(r"^[0-9a-f]+-[0-9a-f]+-[0-9a-f]+(\.[0-9a-f]+)*-[0-9a-f]+$")


def feed(c, app, **params):
    query = "&".join(f"{k}={q(str(v))}" for k, v in params.items())
    r = c.get(f"/_changes/{app}" + (f"?{query}" if query else ""))
    return r


def wait_feeds_open(server, n):
    """Until exactly n change feeds (long polls, streams) wait on the server (/_stats feeds_open,
    every shard's): on a server of the test's own, the feeds it opened."""
    wait_until(lambda: stats_total(server, "feeds_open") == n, what=f"{n} change feed(s) open on the server")


class StreamReader:
    """Reads a chunked stream answer piece by piece: its head, then lines as they come."""

    def __init__(self, conn, target, headers=None):
        self.c = conn
        self.c.send_request("GET", target, headers)
        deadline = time.monotonic() + 5
        head = self.c._read_until(b"\r\n\r\n", deadline)
        self.status = int(head.split(b" ", 2)[1])
        self.head = head.decode("latin-1").lower()
        self.data = b""

    def _chunk(self, deadline):
        line = self.c._read_until(b"\r\n", deadline)[:-2]
        size = int(line, 16)
        if size == 0:
            return None
        piece = self.c._read_exact(size, deadline)
        assert self.c._read_exact(2, deadline) == b"\r\n"
        return piece

    def until(self, predicate, timeout=5.0):
        """Reads chunks until predicate(data) holds; returns data."""
        deadline = time.monotonic() + timeout
        while not predicate(self.data):
            piece = self._chunk(deadline)
            if piece is None:
                raise AssertionError(f"stream ended: {self.data!r}")
            self.data += piece
        return self.data


class FeedHelpers:

    def put(self, c, key, body=b"x", app=None):
        r = c.put(self.path(key, app), body)
        self.assertIn(r.status, (200, 201, 204), r)
        return r

    def page(self, c, app=None, **params):
        r = feed(c, app or self.app, **params)
        self.assertEqual(r.status, 200, r)
        doc = r.json()
        self.assertEqual(set(doc), {"changes", "last_cursor"}, doc)
        self.assertRegex(doc["last_cursor"], CURSOR)
        return doc


class ChangeFeedCase(FeedHelpers, ServerTestCase):

    def test_a_normal_feed_lists_every_change_with_its_etag_size_and_cursor(self):
        c = self.conn()
        etags = {}
        for i in range(10):
            etags[f"k{i}"] = self.put(c, f"k{i}", b"v" * i).etag
        doc = self.page(c)
        got = {ch["key"]: ch for ch in doc["changes"]}
        self.assertEqual(set(got), set(etags))
        for key, ch in got.items():
            self.assertEqual(ch["etag"], etags[key])
            self.assertEqual(ch["size"], int(key[1:]))
            self.assertIs(ch["deleted"], False)
            self.assertRegex(ch["cursor"], CURSOR)

    def test_a_delete_appears_as_deleted_and_a_rewrite_only_once_with_its_newest_version(self):
        c = self.conn()
        self.put(c, "gone")
        self.put(c, "twice", b"1")
        newest = self.put(c, "twice", b"22").etag
        self.assertEqual(c.delete(self.path("gone")).status, 204)
        doc = self.page(c)
        by_key = {}
        for ch in doc["changes"]:
            self.assertNotIn(ch["key"], by_key, doc)
            by_key[ch["key"]] = ch
        self.assertIs(by_key["gone"]["deleted"], True)
        self.assertEqual(by_key["gone"]["size"], 0)
        self.assertEqual(by_key["twice"]["etag"], newest)
        self.assertEqual(by_key["twice"]["size"], 2)

    def test_resuming_from_any_cursor_shows_exactly_what_came_after_it(self):
        c = self.conn()
        for i in range(12):
            self.put(c, f"r{i}")
        doc = self.page(c)
        changes = doc["changes"]
        self.assertEqual(len(changes), 12)
        for n, ch in enumerate(changes):
            rest = self.page(c, since=ch["cursor"])
            self.assertEqual([x["key"] for x in rest["changes"]], [x["key"] for x in changes[n + 1:]])
        self.assertEqual(self.page(c, since=doc["last_cursor"])["changes"], [])

    def test_limit_pages_the_feed_and_the_pages_join_up_in_order(self):
        c = self.conn()
        for i in range(25):
            self.put(c, f"p{i:02d}")
        seen, since = [], "0"
        for _ in range(10):
            doc = self.page(c, since=since, limit=7)
            self.assertLessEqual(len(doc["changes"]), 7)
            seen += [ch["key"] for ch in doc["changes"]]
            since = doc["last_cursor"]
            if not doc["changes"]:
                break
        self.assertEqual(sorted(seen), sorted(f"p{i:02d}" for i in range(25)))
        self.assertEqual(len(seen), 25)

    def test_since_now_shows_only_later_changes(self):
        c = self.conn()
        self.put(c, "before")
        now = self.page(c, since="now")
        self.assertEqual(now["changes"], [])
        self.put(c, "after")
        self.assertEqual([ch["key"] for ch in self.page(c, since=now["last_cursor"])["changes"]], ["after"])

    def test_the_changes_of_one_key_come_in_commit_order(self):
        c = self.conn()
        since = self.page(c, since="now")["last_cursor"]
        versions = []
        for i in range(5):
            self.put(c, "same", str(i).encode())
            doc = self.page(c, since=since)
            self.assertEqual(len(doc["changes"]), 1)
            versions.append(doc["changes"][0]["etag"])
            since = doc["last_cursor"]
        self.assertEqual(len(set(versions)), 5)

    def test_a_prefix_lists_only_its_keys(self):
        c = self.conn()
        for key in ("a/1", "a/2", "b/1"):
            self.put(c, key)
        self.assertEqual(sorted(ch["key"] for ch in self.page(c, prefix="a/")["changes"]), ["a/1", "a/2"])

    def test_another_apps_changes_never_appear(self):
        c = self.conn()
        other = unique("o")
        self.put(c, "mine")
        self.put(c, "theirs", app=other)
        self.assertEqual([ch["key"] for ch in self.page(c)["changes"]], ["mine"])

    def test_text_that_is_not_a_cursor_is_400(self):
        c = self.conn()
        self.put(c, "x")
        good = self.page(c)["last_cursor"]
        for bad in ("nonsense", "1-2-3", good[:-1], good.replace("-", "_")):
            self.assert_json_error(feed(c, self.app, since=bad), 400)
        for params in ({"feed": "poll"}, {"limit": 0}, {"timeout": 301}, {"heartbeat": 0}):
            self.assert_json_error(feed(c, self.app, **params), 400)

    def test_a_cursor_of_another_directory_is_410_with_the_oldest_cursor(self):
        c = self.conn()
        self.put(c, "x")
        other = start_server(self.shard_count())
        try:
            with other.conn() as oc:
                oc.put(f"/{self.app}/y", b"1")
                foreign = feed(oc, self.app).json()["last_cursor"]
        finally:
            other.stop_and_check()
            other.cleanup()
        r = feed(c, self.app, since=foreign)
        self.assert_json_error(r, 410)
        doc = r.json()
        self.assertEqual(doc["error"], "cursor expired")
        self.assertRegex(doc["oldest"], CURSOR)
        self.assertEqual(feed(c, self.app, since=doc["oldest"]).status, 200)

    def test_metrics_count_open_feeds_changes_sent_and_expired_cursors_per_shard_and_per_app(self):
        def total(name):
            text = self.conn().get("/_metrics").body.decode()
            return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                       if line.startswith(name + "{") or line.startswith(name + " "))

        def app_feeds():
            r = self.conn().get(f"/_apps/{self.app}")
            self.assertEqual(r.status, 200, r)
            return r.json()["usage"]["feeds"]
        c = self.conn()
        sent = total("percore_feed_changes_sent_total")
        app_sent = total("percore_app_feed_changes_sent_total")
        expired = total("percore_feed_cursors_expired_total")
        app_expired = total("percore_app_feed_cursors_expired_total")
        self.put(c, "m")
        self.assertEqual(app_feeds(), {"open": 0, "changes_sent": 0, "cursors_expired": 0})
        self.assertEqual(len(self.page(c)["changes"]), 1)
        self.assertEqual(total("percore_feed_changes_sent_total"), sent + 1)
        self.assertEqual(total("percore_app_feed_changes_sent_total"), app_sent + 1)
        self.assertEqual(feed(c, self.app, since="0-1-0-0").status, 400)
        waiting = self.conn()
        waiting.send_request("GET", f"/_changes/{self.app}?feed=longpoll&timeout=5&since=now")
        wait_until(lambda: app_feeds()["open"] >= 1, what="the app's long poll open")
        self.assertEqual(app_feeds()["open"], 1)
        self.assertGreaterEqual(total("percore_feeds_open"), 1)
        self.assertGreaterEqual(total("percore_app_feeds_open"), 1)
        self.put(c, "m2")
        self.assertEqual(waiting.read_response(timeout=5).status, 200)
        other = start_server(self.shard_count())
        try:
            with other.conn() as oc:
                foreign = feed(oc, self.app).json()["last_cursor"]
        finally:
            other.stop_and_check()
            other.cleanup()
        self.assertEqual(feed(c, self.app, since=foreign).status, 410)
        self.assertEqual(total("percore_feed_cursors_expired_total"), expired + 1)
        self.assertEqual(total("percore_app_feed_cursors_expired_total"), app_expired + 1)
        self.assertEqual(app_feeds(), {"open": 0, "changes_sent": 2, "cursors_expired": 1})

    def test_a_long_poll_with_nothing_ends_at_its_timeout_with_no_changes(self):
        c = self.conn()
        start = time.monotonic()
        r = feed(c, self.app, feed="longpoll", timeout=1, since="now")
        elapsed = time.monotonic() - start
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["changes"], [])
        self.assertGreaterEqual(elapsed, 0.9)
        self.assertLess(elapsed, 2.0)
        self.assertEqual(c.get("/_health").status, 200)  # the connection goes on

    def test_a_long_poll_that_has_changes_answers_at_once(self):
        c = self.conn()
        self.put(c, "ready")
        start = time.monotonic()
        doc = feed(c, self.app, feed="longpoll", timeout=30).json()
        self.assertLess(time.monotonic() - start, 1.0)
        self.assertEqual([ch["key"] for ch in doc["changes"]], ["ready"])

    def test_a_continuous_feed_streams_each_change_as_a_json_line(self):
        c, w = self.conn(), self.conn()
        self.put(w, "first")
        s = StreamReader(c, f"/_changes/{self.app}?feed=continuous")
        self.assertEqual(s.status, 200)
        self.assertIn("application/x-ndjson", s.head)
        s.until(lambda d: b"first" in d)
        self.put(w, "second")
        data = s.until(lambda d: b"second" in d)
        lines = [json.loads(line) for line in data.split(b"\n") if line.strip()]
        self.assertEqual([ch["key"] for ch in lines], ["first", "second"])

    def test_a_continuous_feed_sends_an_empty_line_every_heartbeat(self):
        c = self.conn()
        s = StreamReader(c, f"/_changes/{self.app}?feed=continuous&heartbeat=1&since=now")
        start = time.monotonic()
        s.until(lambda d: d.count(b"\n") >= 2, timeout=4)
        elapsed = time.monotonic() - start
        self.assertEqual(s.data.strip(b"\n"), b"")
        self.assertGreaterEqual(elapsed, 1.5)
        self.assertLess(elapsed, 3.5)

    def test_an_event_stream_sends_a_comment_every_heartbeat(self):
        c = self.conn()
        s = StreamReader(c, f"/_changes/{self.app}?feed=eventsource&heartbeat=1&since=now")
        self.assertIn("text/event-stream", s.head)
        start = time.monotonic()
        s.until(lambda d: d.count(b"\n\n") >= 2, timeout=4)
        elapsed = time.monotonic() - start
        self.assertEqual(s.data, b": heartbeat\n\n" * 2)  # comments: an EventSource client ignores them
        self.assertGreaterEqual(elapsed, 1.5)
        self.assertLess(elapsed, 3.5)

    def test_an_event_stream_names_each_change_by_its_cursor_and_resumes_from_last_event_id(self):
        c, w = self.conn(), self.conn()
        s = StreamReader(c, f"/_changes/{self.app}?feed=eventsource")
        self.assertIn("text/event-stream", s.head)
        self.put(w, "e1")
        data = s.until(lambda d: b"e1" in d and d.endswith(b"\n\n"))
        m = re.search(rb"id: (\S+)\ndata: (\{.*\})\n\n", data)
        self.assertIsNotNone(m, data)
        cursor = m.group(1).decode()
        self.assertEqual(json.loads(m.group(2))["cursor"], cursor)
        self.put(w, "e2")
        c2 = self.conn()
        s2 = StreamReader(c2, f"/_changes/{self.app}?feed=eventsource", {"Last-Event-ID": cursor})
        data2 = s2.until(lambda d: b"e2" in d)
        self.assertNotIn(b'"e1"', data2)


class ChangeFeedWaitCase(FeedHelpers, ServerTestCase):
    """Tests that wait until their feeds wait on the server (/_stats feeds_open) before they write:
    each on a server of its own, whose count is then theirs alone. (A server notices that a waiting
    feed's client went away only when it next writes to it: a stream closed by an earlier test stays
    counted until a heartbeat fails, a long poll until its timeout.)"""

    @classmethod
    def setUpClass(cls):
        unittest.TestCase.setUpClass()

    @classmethod
    def tearDownClass(cls):
        unittest.TestCase.tearDownClass()

    def setUp(self):
        super().setUp()
        self.server = start_server(self.shard_count(), self.SERVER_ARGS)
        self.addCleanup(self.server.cleanup)
        self.addCleanup(self.server.stop_and_check, self)  # after tearDown closed the connections

    def test_a_long_poll_is_answered_within_milliseconds_of_the_write_that_ends_it(self):
        c, w = self.conn(), self.conn()
        since = self.page(c, since="now")["last_cursor"]
        c.send_request("GET", f"/_changes/{self.app}?feed=longpoll&timeout=10&since={since}")
        wait_feeds_open(self.server, 1)
        start = time.monotonic()
        self.put(w, "wake")
        r = c.read_response(timeout=5)
        elapsed = time.monotonic() - start
        self.assertEqual(r.status, 200, r)
        self.assertEqual([ch["key"] for ch in r.json()["changes"]], ["wake"])
        self.assertLess(elapsed, 0.5, f"long poll answered {elapsed * 1000:.0f} ms after the write")

    def test_a_long_poll_opened_before_its_app_existed_is_counted_open_then_closed_once(self):
        # The app is made by the write that ends the poll (--auth off): the open count it reports
        # must go back to 0, not below (it once wrapped to 2^64-1: feed_waits::count_open).
        c, w = self.conn(), self.conn()
        c.send_request("GET", f"/_changes/{self.app}?feed=longpoll&timeout=10")
        wait_feeds_open(self.server, 1)
        self.put(w, "first")
        r = c.read_response(timeout=5)
        self.assertEqual(r.status, 200, r)
        wait_feeds_open(self.server, 0)
        info = w.get(f"/_apps/{self.app}")
        self.assertEqual(info.status, 200, info)
        self.assertEqual(info.json()["usage"]["feeds"]["open"], 0, info.json())

    def test_a_long_poll_on_one_app_is_answered_by_its_write_while_another_app_writes_without_pause(self):
        c, w = self.conn(), self.conn()
        busy = unique("busy")
        stop = threading.Event()
        flooded = [0]   # the other app's writes acknowledged so far

        def flood():
            with self.conn() as fc:
                i = 0
                while not stop.is_set():
                    self.put(fc, f"f{i % 50}", app=busy)
                    i += 1
                    flooded[0] = i
        flooder = threading.Thread(target=flood)
        flooder.start()
        try:
            since = self.page(c, since="now")["last_cursor"]
            c.send_request("GET", f"/_changes/{self.app}?feed=longpoll&timeout=10&since={since}")
            wait_feeds_open(self.server, 1)
            # the other app's batches publish meanwhile (each write acknowledged is one published):
            # none of them ends this wait
            mark = flooded[0]
            wait_until(lambda: flooded[0] >= mark + 50, what="50 writes of the other app while the long poll waits")
            start = time.monotonic()
            self.put(w, "mine")
            r = c.read_response(timeout=5)
            elapsed = time.monotonic() - start
        finally:
            stop.set()
            flooder.join()
        self.assertEqual(r.status, 200, r)
        self.assertEqual([ch["key"] for ch in r.json()["changes"]], ["mine"])
        self.assertLess(elapsed, 0.5, f"long poll answered {elapsed * 1000:.0f} ms after the write")

    def test_a_consumer_that_stops_reading_is_cut_off_while_another_keeps_going(self):
        request = f"GET /_changes/{self.app}?feed=continuous&since=now HTTP/1.1\r\nHost: localhost\r\n\r\n".encode()
        stalled = socket.create_connection(("127.0.0.1", self.server.port))
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stalled.sendall(request)
        # ~1.1 KiB a line, 8 MiB in all: past the stream's bound (256 KiB) and what the kernel's
        # socket buffers take (a few MiB).
        key, count = "k" * 1000, 7000
        last = f"{key}{count - 1}\"".encode()
        healthy = {"bytes": 0, "done": False}

        def read_healthy(sock):
            tail = b""
            sock.settimeout(60)
            while not healthy["done"]:
                piece = sock.recv(1 << 20)
                if not piece:
                    return
                healthy["bytes"] += len(piece)
                healthy["done"] = last in tail + piece
                tail = piece[-2048:]

        reader_sock = socket.create_connection(("127.0.0.1", self.server.port))
        reader_sock.sendall(request)
        reader = threading.Thread(target=read_healthy, args=(reader_sock,))
        reader.start()
        wait_feeds_open(self.server, 2)  # both feeds are open before the first write
        w = self.conn()
        for start in range(0, count, 1000):  # pipelined: the writes share batches and syncs
            w.send(b"".join(build_request("PUT", self.path(f"{key}{i}"), None, b"v")
                            for i in range(start, start + 1000)))
            for _ in range(1000):
                self.assertIn(w.read_response(timeout=30).status, (201, 204))
        reader.join(60)
        reader_sock.close()
        self.assertTrue(healthy["done"], f"the reading consumer stopped after {healthy['bytes']} bytes")
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)  # now drain it quickly
        stalled.settimeout(10)
        got, ended = 0, False
        try:
            while True:
                piece = stalled.recv(1 << 20)
                if not piece:
                    ended = True
                    break
                got += len(piece)
        except ConnectionResetError:
            ended = True
        except socket.timeout:
            pass
        stalled.close()
        self.assertTrue(ended, f"the stalled consumer was never cut off ({got} bytes read, then silence)")
        self.assertLess(got, healthy["bytes"], "the stalled consumer got everything: it was never cut off")


class ChangeFeedAuthCase(ServerTestCase):
    """--auth on: the feed needs read scope on its app, and a token's prefix filters it."""

    SERVER_ARGS = ("--auth", "on")

    def setUp(self):
        super().setUp()
        with open(os.path.join(self.server.data, "admin.token")) as f:
            self.admin = f.read().strip()
        c = self.conn()
        r = c.request("PUT", f"/_apps/{self.app}", bearer(self.admin), b'{"quota":{}}')
        self.assertEqual(r.status, 201, r)

    def token(self, scope, prefix=None):
        spec = {"scope": scope, **({"prefix": prefix} if prefix is not None else {})}
        r = self.conn().request("POST", f"/_apps/{self.app}/tokens", bearer(self.admin), json.dumps(spec).encode())
        self.assertEqual(r.status, 201, r)
        return r.json()["token"]

    def test_a_read_token_reads_the_feed_and_no_token_is_401(self):
        c = self.conn()
        writer = self.token("write")
        for key in ("a/1", "b/1"):
            self.assertEqual(c.request("PUT", self.path(key), bearer(writer), b"x").status, 201)
        reader = self.token("read")
        r = c.request("GET", f"/_changes/{self.app}", bearer(reader))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(sorted(ch["key"] for ch in r.json()["changes"]), ["a/1", "b/1"])
        self.assert_json_error(c.request("GET", f"/_changes/{self.app}"), 401)

    def test_a_token_of_another_app_is_403(self):
        c = self.conn()
        other = unique("o")
        self.assertEqual(c.request("PUT", f"/_apps/{other}", bearer(self.admin), b'{"quota":{}}').status, 201)
        r = c.request("POST", f"/_apps/{other}/tokens", bearer(self.admin), b'{"scope":"read"}')
        self.assert_json_error(c.request("GET", f"/_changes/{self.app}", bearer(r.json()["token"])), 403)

    def test_a_prefix_token_sees_only_the_changes_under_its_prefix(self):
        c = self.conn()
        writer = self.token("write")
        for key in ("a/1", "a/2", "b/1"):
            self.assertEqual(c.request("PUT", self.path(key), bearer(writer), b"x").status, 201)
        reader = self.token("read", prefix="a/")
        r = c.request("GET", f"/_changes/{self.app}", bearer(reader))
        self.assertEqual(sorted(ch["key"] for ch in r.json()["changes"]), ["a/1", "a/2"])
        r = c.request("GET", f"/_changes/{self.app}?prefix=b/", bearer(reader))
        self.assertEqual(r.json()["changes"], [])


class ChangeFeedRetentionCase(ServerTestCase):
    SERVER_ARGS = ("--changes-retention", "1")

    def test_a_cursor_older_than_the_retention_is_410_with_an_oldest_cursor_that_works(self):
        c = self.conn()
        c.put(self.path("a"), b"1")
        old = feed(c, self.app).json()["last_cursor"]
        writes = [0]

        def expired():
            # the retention must really pass: a write each look keeps the retention's checkpoints
            # (at most one a second) moving past `old`
            writes[0] += 1
            self.assertIn(c.put(self.path(f"w{writes[0]}"), b"1").status, (201, 204))
            r = feed(c, self.app, since=old)
            return r if r.status == 410 else None
        r = wait_until(expired, timeout=10, interval=0.25, what="a cursor older than the 1 s retention to be 410")
        self.assert_json_error(r, 410)
        oldest = r.json()["oldest"]
        self.assertRegex(oldest, CURSOR)
        self.assertEqual(feed(c, self.app, since=oldest).status, 200)

    def test_a_delete_stays_in_the_feed_for_the_retention_then_goes(self):
        c = self.conn()
        c.put(self.path("gone"), b"1")
        self.assertEqual(c.delete(self.path("gone")).status, 204)
        keys = [ch["key"] for ch in feed(c, self.app).json()["changes"]]
        self.assertEqual(keys, ["gone"])
        wait_until(lambda: not feed(c, self.app).json()["changes"], timeout=6, interval=0.25,
                   what="the delete to leave the feed after the 1 s retention")
        self.assertEqual(feed(c, self.app).json()["changes"], [])


class ChangeFeedRestartCase(unittest.TestCase):

    def test_a_cursor_stays_valid_across_a_restart_and_is_410_after_another_shard_count(self):
        shards = env_shards()
        srv = start_server(shards)
        data = srv.data
        app = unique("r")
        try:
            with srv.conn() as c:
                c.put(f"/{app}/a", b"1")
                cursor = feed(c, app).json()["last_cursor"]
                c.put(f"/{app}/b", b"2")
            srv.send_signal(signal.SIGKILL)
            srv.proc.wait(10)
            again = Server(shards, data=data)
            again.wait_ready()
            try:
                with again.conn() as c:
                    doc = feed(c, app, since=cursor).json()
                    self.assertEqual([ch["key"] for ch in doc["changes"]], ["b"])
            finally:
                again.stop_and_check()
                again.cleanup()
            other = Server(shards + 1, data=data)
            other.wait_ready()
            try:
                with other.conn() as c:
                    r = feed(c, app, since=cursor)
                    self.assertEqual(r.status, 410, r)
                    self.assertEqual(feed(c, app, since=r.json()["oldest"]).status, 200)
            finally:
                other.stop_and_check()
                other.cleanup()
        finally:
            srv.cleanup()

    def test_sigterm_answers_waiting_long_polls_ends_streams_and_exits_within_5_seconds(self):
        srv = start_server(env_shards())
        app = unique("t")
        try:
            poll, stream = srv.conn(), srv.conn()
            poll.send_request("GET", f"/_changes/{app}?feed=longpoll&timeout=300&since=now")
            s = StreamReader(stream, f"/_changes/{app}?feed=continuous&since=now")
            self.assertEqual(s.status, 200)
            wait_feeds_open(srv, 2)  # both wait before the signal
            start = time.monotonic()
            srv.send_signal(signal.SIGTERM)
            r = poll.read_response(timeout=5)
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.json()["changes"], [])
            self.assertEqual(srv.proc.wait(5), 0)
            self.assertLess(time.monotonic() - start, 5.0)
            poll.close()
            stream.close()
        finally:
            srv.cleanup()


if __name__ == "__main__":
    unittest.main()
