"""SPEC section 9: deliveries sent — a real receiver process on loopback (webhook_receiver.py),
signatures checked by the Standard Webhooks reference library under Node (tests/tools), sealed
batches opened with the seal key; 1 and 3 shards. The retry schedule is scaled down for tests
(PERCORE_TEST_DELIVERY_TIME_SCALE): 5 s becomes 50 ms."""

import base64
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

from percore_client import LOOPBACK_RECEIVERS, ServerTestCase, env_shards, start_server, unique, wait_until
from webhook_receiver import Receiver

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.join(HERE, "..", "tools")
SCALE = {"PERCORE_TEST_DELIVERY_TIME_SCALE": "0.01"}


def batch_of(record):
    return json.loads(base64.b64decode(record["body_base64"]))


def header(record, name):
    for k, v in record["headers"]:
        if k.lower() == name:
            return v
    return None


def delivered_values(receiver):
    """key -> the value (bytes) of its last change the receiver got (None for a delete)."""
    seen = {}
    for rec in receiver.requests():
        for ch in batch_of(rec)["changes"]:
            seen[ch["key"]] = None if ch["deleted"] else base64.b64decode(ch["value_base64"])
    return seen


def node(tool, *args, stdin=None):
    return subprocess.run(["node", os.path.join(TOOLS, tool), *args], input=stdin, capture_output=True, timeout=60)


class DeliveryCase(ServerTestCase):
    ENV = SCALE

    @classmethod
    def setUpClass(cls):
        unittest.TestCase.setUpClass()
        cls.server = start_server(cls.shard_count(), (*LOOPBACK_RECEIVERS, *cls.SERVER_ARGS), env=cls.ENV)

    def setUp(self):
        super().setUp()
        self.receiver = Receiver()
        self.addCleanup(self.receiver.stop)
        self.c = self.conn()
        self.assertEqual(self.c.put(f"/{self.app}/_first", b"0").status, 201)  # --auth off: makes the app

    def create(self, name="hook", **spec):
        body = {"url": self.receiver.url + "/hook", **spec}
        r = self.c.request("PUT", f"/_apps/{self.app}/deliveries/{name}", None, json.dumps(body).encode())
        self.assertIn(r.status, (201, 204), r)
        return r.json() if r.status == 201 else None

    def info(self, name="hook"):
        r = self.conn().request("GET", f"/_apps/{self.app}/deliveries/{name}")
        self.assertEqual(r.status, 200, r)
        return r.json()

    def write(self, key, value):
        r = self.c.put(f"/{self.app}/{key}", value)
        self.assertIn(r.status, (201, 204), r)
        return r

    def received_changes(self, records=None):
        out = []
        for rec in records if records is not None else self.receiver.requests():
            out.extend(batch_of(rec)["changes"])
        return out


class TestDelivered(DeliveryCase):
    def test_every_acknowledged_write_arrives_in_order_per_key_with_its_newest_value_last(self):
        self.create()
        model = {}
        for i in range(60):
            key = f"k{i % 13}"
            if i % 7 == 6:
                r = self.c.delete(f"/{self.app}/{key}")
                self.assertIn(r.status, (204, 404))
                if r.status == 204:
                    model[key] = None
            else:
                value = f"v{i}".encode()
                self.write(key, value)
                model[key] = value

        def caught_up():
            seen = delivered_values(self.receiver)
            return all(seen.get(k, "missing") == v for k, v in model.items())
        wait_until(caught_up, what="the receiver to hold every acknowledged write")
        per_key = {}
        for ch in self.received_changes():
            per_key.setdefault(ch["key"], []).append(ch["etag"])
        for key, etags in per_key.items():
            versions = [int(e.strip('"'), 16) for e in etags]
            self.assertEqual(versions, sorted(versions), f"{key}: changes out of commit order")
        self.assertEqual(self.info()["state"], "active")
        wait_until(lambda: self.info()["lag"]["changes"] == 0, what="lag 0")

    def test_each_batch_is_signed_as_the_standard_webhooks_library_verifies(self):
        secret = self.create()["signing_secret"]
        for i in range(5):
            self.write(f"s{i}", f"value {i}".encode())
        wait_until(lambda: len(self.received_changes()) >= 5, what="5 changes")
        done = subprocess.run(["node", os.path.join(TOOLS, "verify_webhook.mjs"), "--secret", secret, "--at-arrival",
                               self.receiver.record_path], capture_output=True, timeout=60)
        self.assertEqual(done.returncode, 0, done.stdout.decode() + done.stderr.decode())
        lines = [json.loads(line) for line in done.stdout.decode().splitlines()]
        self.assertTrue(lines and all(x["ok"] and x["verifier"] == "standardwebhooks" for x in lines), lines)
        # a tampered body fails the same check: the verification can fail
        rec = dict(self.receiver.requests()[0])
        rec["body_base64"] = base64.b64encode(base64.b64decode(rec["body_base64"]) + b" ").decode()
        bad = node("verify_webhook.mjs", "--secret", secret, "--at-arrival", "-", stdin=json.dumps(rec).encode())
        self.assertNotEqual(bad.returncode, 0)

    def test_a_batch_that_fails_is_retried_with_the_same_webhook_id_and_body_until_a_2xx(self):
        self.receiver.script(steps=[{"status": 500}, {"status": 503}], default={"status": 200})
        self.create()
        self.write("r1", b"once")
        records = self.receiver.wait_for(3)
        self.assertEqual(len({header(r, "webhook-id") for r in records[:3]}), 1, records)
        self.assertEqual(len({r["body_base64"] for r in records[:3]}), 1)
        wait_until(lambda: self.info()["last_status"] == 200, what="last_status 200")
        info = self.info()
        self.assertEqual((info["state"], info["attempts"], info["last_error"]), ("active", 0, None))

    def test_a_redirect_is_not_followed_but_counted_as_a_failed_attempt(self):
        self.receiver.script(steps=[{"status": 302}], default={"status": 200})
        self.create()
        self.write("x1", b"moved?")
        records = self.receiver.wait_for(2)
        self.assertEqual([r["path"] for r in records[:2]], ["/hook", "/hook"])  # never /redirected
        self.assertEqual(header(records[0], "webhook-id"), header(records[1], "webhook-id"))
        wait_until(lambda: self.info()["last_status"] == 200, what="delivered on the retry")

    def test_a_receiver_that_never_answers_times_out_and_the_batch_is_sent_again(self):
        self.receiver.script(steps=[{"hang": True}], default={"status": 200})
        self.create()
        self.write("t1", b"slow")
        records = self.receiver.wait_for(2, timeout=10)
        self.assertEqual(header(records[0], "webhook-id"), header(records[1], "webhook-id"))
        wait_until(lambda: self.info()["last_status"] == 200, what="delivered after the timeout")

    def test_a_410_disables_the_delivery_and_a_put_makes_it_active_again_keeping_its_cursor(self):
        self.receiver.script(steps=[{"status": 410}], default={"status": 200})
        self.create()
        self.write("g1", b"a")
        wait_until(lambda: self.info()["state"] == "disabled", what="disabled")
        info = self.info()
        self.assertEqual(info["last_status"], 410)
        self.write("g2", b"b")
        # a window, not a poll: what is checked is that nothing arrives (the first attempt of an
        # active delivery comes within milliseconds of a write)
        time.sleep(0.3)
        self.assertEqual(len(self.receiver.requests()), 1, "a disabled delivery sends nothing")
        self.assertIsNone(self.create())  # 204: the same delivery again
        wait_until(lambda: {c["key"] for c in self.received_changes()} >= {"g1", "g2"}, what="g1 and g2 after the PUT")
        self.assertEqual(self.info()["state"], "active")

    def test_a_deleted_delivery_sends_nothing_more(self):
        self.create()
        self.write("d1", b"x")
        wait_until(lambda: self.received_changes(), what="the first batch")
        r = self.c.request("DELETE", f"/_apps/{self.app}/deliveries/hook")
        self.assertEqual(r.status, 204, r)
        before = len(self.receiver.requests())
        self.write("d2", b"y")
        # a window, not a poll: what is checked is that nothing arrives (the first attempt of an
        # active delivery comes within milliseconds of a write)
        time.sleep(0.5)
        self.assertEqual(len(self.receiver.requests()), before)

    def test_a_sealed_batch_opens_with_the_seal_key_and_its_signature_covers_the_sealed_bytes(self):
        doc = self.create(seal=True)
        self.write("sealed", b"secret value")
        rec = self.receiver.wait_for(1)[0]
        self.assertEqual(header(rec, "content-type"), "application/vnd.percore.sealed")
        sealed = base64.b64decode(rec["body_base64"])
        self.assertNotIn(b"secret value", sealed)
        opened = node("open_sealed.mjs", "--key", doc["seal_key"], "--base64", rec["body_base64"])
        self.assertEqual(opened.returncode, 0, opened.stderr)
        batch = json.loads(opened.stdout)
        self.assertIn("sealed", [c["key"] for c in batch["changes"]])
        # The signature covers the sealed bytes; the reference library reads bodies as text, so a
        # binary body is checked by Node's own HMAC (docs/decisions.md, "Deliveries").
        done = subprocess.run(["node", os.path.join(TOOLS, "verify_webhook.mjs"), "--secret", doc["signing_secret"],
                               "--at-arrival", "--binary-bodies", "hmac", "-"], input=json.dumps(rec).encode(),
                              capture_output=True, timeout=60)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)


    def test_metrics_count_attempts_and_failures_by_cause_and_show_each_deliverys_lag_and_state(self):
        def metrics():
            text = self.conn().get("/_metrics").body.decode()
            return text

        def total(text, name, label=""):
            return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                       if line.startswith(name + "{") and label in line)
        before = metrics()
        self.receiver.script(steps=[{"status": 500}], default={"status": 200})
        self.create()
        self.write("m1", b"x")
        wait_until(lambda: self.info()["last_status"] == 200, what="delivered after one failure")
        after = metrics()
        self.assertEqual(total(after, "percore_delivery_failures_total", 'cause="status"') -
                         total(before, "percore_delivery_failures_total", 'cause="status"'), 1)
        self.assertGreaterEqual(total(after, "percore_delivery_attempts_total") -
                                total(before, "percore_delivery_attempts_total"), 2)
        self.assertGreaterEqual(total(after, "percore_delivery_changes_sent_total") -
                                total(before, "percore_delivery_changes_sent_total"), 1)
        mine = f'app="{self.app}",delivery="hook"'
        self.assertIn(f'percore_delivery_state{{{mine},state="active"}} 1', after)
        self.assertIn(f'percore_delivery_lag_changes{{{mine}}} 0', after)
        # a dead receiver: the lag grows and is shown
        self.receiver.script(default={"status": 500})
        self.write("m2", b"y")
        self.write("m3", b"z")
        wait_until(lambda: f'percore_delivery_lag_changes{{{mine}}} 2' in metrics(), what="lag 2")
        wait_until(lambda: f'percore_delivery_state{{{mine},state="retrying"}} 1' in metrics(), what="retrying")


class TestHttps(DeliveryCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.ca_dir = tempfile.mkdtemp(prefix="percore-test-ca-")
        subprocess.run(["bash", os.path.join(TOOLS, "make_test_ca.sh"), cls.ca_dir], check=True, capture_output=True)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.ca_dir, ignore_errors=True)
        super().tearDownClass()

    def https_receiver(self, name):
        r = Receiver(cert=os.path.join(self.ca_dir, f"{name}.pem"), key=os.path.join(self.ca_dir, f"{name}.key"))
        self.addCleanup(r.stop)
        return r

    def ca_pem(self):
        with open(os.path.join(self.ca_dir, "ca.pem")) as f:
            return f.read()

    def test_an_https_receiver_whose_certificate_the_ca_pem_trusts_gets_its_batches(self):
        receiver = self.https_receiver("server")
        r = self.c.request("PUT", f"/_apps/{self.app}/deliveries/tls", None, json.dumps({
            "url": f"https://localhost:{receiver.port}/hook", "ca_pem": self.ca_pem()}).encode())
        self.assertEqual(r.status, 201, r)
        self.write("secure", b"over tls")
        rec = receiver.wait_for(1)[0]
        self.assertTrue(rec["tls"], rec)
        self.assertEqual([c["key"] for c in batch_of(rec)["changes"]], ["secure"])
        wait_until(lambda: self.info("tls")["last_status"] == 200, what="delivered over TLS")

    def test_a_receiver_whose_certificate_names_another_host_is_refused(self):
        receiver = self.https_receiver("wrong")
        r = self.c.request("PUT", f"/_apps/{self.app}/deliveries/tls", None, json.dumps({
            "url": f"https://localhost:{receiver.port}/hook", "ca_pem": self.ca_pem()}).encode())
        self.assertEqual(r.status, 201, r)
        self.write("secure", b"never sent")
        # (an attempt that times out first, on a loaded sanitizer build, is retried: wait for the refusal)
        wait_until(lambda: "hostname mismatch" in (self.info("tls")["last_error"] or ""), timeout=20,
                   what="the certificate refused for its name")
        info = self.info("tls")
        self.assertEqual(info["state"], "retrying")
        self.assertIn("tls_failed", info["last_error"])
        self.assertEqual(receiver.requests(), [])  # nothing was sent to it

    def test_a_receiver_trusted_only_by_a_ca_pem_is_refused_with_the_system_store(self):
        receiver = self.https_receiver("server")
        r = self.c.request("PUT", f"/_apps/{self.app}/deliveries/tls", None,
                           json.dumps({"url": f"https://localhost:{receiver.port}/hook"}).encode())
        self.assertEqual(r.status, 201, r)
        self.write("secure", b"never sent")
        wait_until(lambda: "certificate verify failed" in (self.info("tls")["last_error"] or ""), timeout=20,
                   what="the test CA refused by the system store")
        self.assertEqual(receiver.requests(), [])


    def test_a_ca_pem_with_its_certificate_among_text_is_taken_and_a_ca_file_is_400(self):
        receiver = self.https_receiver("server")
        url = f"https://localhost:{receiver.port}/hook"
        r = self.c.request("PUT", f"/_apps/{self.app}/deliveries/tls", None,
                           json.dumps({"url": url, "ca_file": os.path.join(self.ca_dir, "ca.pem")}).encode())
        self.assert_json_error(r, 400)
        r = self.c.request("PUT", f"/_apps/{self.app}/deliveries/tls", None, json.dumps({
            "url": url, "ca_pem": "our receiver's CA:\n" + self.ca_pem() + "(end)\n"}).encode())
        self.assertEqual(r.status, 201, r)
        self.write("secure", b"over tls")
        self.assertTrue(receiver.wait_for(1)[0]["tls"])


    def test_a_ca_pem_of_64_kib_whose_escaped_json_is_larger_is_taken(self):
        ca = self.ca_pem()
        line = "comment\t\"line\"\n"  # escaped in JSON it grows: the body passes 64 KiB
        pad = line * ((64 * 1024 - len(ca)) // len(line))
        pem = pad + ca
        self.assertLessEqual(len(pem.encode()), 64 * 1024)
        body = json.dumps({"url": "https://localhost:9/hook", "ca_pem": pem}).encode()
        self.assertGreater(len(body), 64 * 1024)
        r = self.c.request("PUT", f"/_apps/{self.app}/deliveries/big", None, body)
        self.assertEqual(r.status, 201, r)


class TestRepointed(DeliveryCase):
    """Review M4: a PUT that changes a retrying delivery's url and prefix must not send the batch
    built for the old ones (keys outside the new prefix) to the new receiver."""

    def test_a_retrying_delivery_re_pointed_to_a_prefix_sends_the_new_url_only_keys_within_it(self):
        self.receiver.script(default={"status": 503})  # the old receiver fails: the batch waits, retried
        self.create()
        self.write("b/secret", b"outside")
        wait_until(lambda: self.info()["state"] == "retrying" and self.info()["attempts"] >= 1, what="retrying")
        new = Receiver()
        self.addCleanup(new.stop)
        body = json.dumps({"url": new.url + "/new", "prefix": "a/"}).encode()
        # a PUT may meet the engine's own record write (409 after its retries): asked again until 204
        wait_until(lambda: self.c.request("PUT", f"/_apps/{self.app}/deliveries/hook", None, body).status == 204,
                   what="the delivery re-pointed")
        self.write("a/inside", b"inside")
        wait_until(lambda: any(ch["key"] == "a/inside" for ch in self.received_changes(new.requests())),
                   timeout=20, what="the new receiver got a/inside")
        keys = [ch["key"] for ch in self.received_changes(new.requests())]
        self.assertTrue(all(k.startswith("a/") for k in keys), keys)


class TestNames(DeliveryCase):
    def test_a_receiver_named_by_a_host_name_is_resolved_and_reached(self):
        r = self.c.request("PUT", f"/_apps/{self.app}/deliveries/named", None,
                           json.dumps({"url": f"http://localhost:{self.receiver.port}/named"}).encode())
        self.assertEqual(r.status, 201, r)
        self.write("n1", b"by name")
        rec = self.receiver.wait_for(1)[0]
        self.assertEqual(rec["path"], "/named")
        self.assertEqual(header(rec, "host"), f"localhost:{self.receiver.port}")

    def test_a_host_name_that_does_not_resolve_is_a_failed_attempt_saying_so(self):
        r = self.c.request("PUT", f"/_apps/{self.app}/deliveries/nowhere", None,
                           json.dumps({"url": "http://nonexistent.invalid/hook"}).encode())
        self.assertEqual(r.status, 201, r)
        self.write("n2", b"nowhere")
        wait_until(lambda: self.info("nowhere")["last_error"], timeout=60, what="a failed attempt")
        self.assertIn("resolving the host", self.info("nowhere")["last_error"])


class TestSealedSuites(unittest.TestCase):
    """A sealed batch opens with the seal key under both suites, each forced by PERCORE_SEAL_SUITE."""

    def sealed_batch_with(self, suite):
        srv = start_server(env_shards(), LOOPBACK_RECEIVERS, env={**SCALE, "PERCORE_SEAL_SUITE": suite})
        receiver = Receiver()
        try:
            app = unique("a")
            c = srv.conn()
            self.assertEqual(c.put(f"/{app}/first", b"0").status, 201)
            r = c.request("PUT", f"/_apps/{app}/deliveries/hook", None,
                          json.dumps({"url": receiver.url + "/hook", "seal": True}).encode())
            self.assertEqual(r.status, 201, r)
            key = r.json()["seal_key"]
            self.assertEqual(c.put(f"/{app}/{suite}", b"sealed with " + suite.encode()).status, 201)
            rec = receiver.wait_for(1)[0]
            opened = node("open_sealed.mjs", "--key", key, "--json", "--base64", rec["body_base64"])
            self.assertEqual(opened.returncode, 0, opened.stderr)
            c.close()
            return json.loads(opened.stdout)
        finally:
            receiver.stop()
            srv.stop_and_check()
            srv.cleanup()

    def test_a_batch_sealed_with_aes_256_gcm_opens_with_the_seal_key(self):
        out = self.sealed_batch_with("aes-256-gcm")
        self.assertEqual(out["suite"], "aes-256-gcm")
        self.assertIn("aes-256-gcm", [c["key"] for c in json.loads(base64.b64decode(out["plaintext_base64"]))["changes"]])

    def test_a_batch_sealed_with_chacha20_poly1305_opens_with_the_seal_key(self):
        out = self.sealed_batch_with("chacha20-poly1305")
        self.assertEqual(out["suite"], "chacha20-poly1305")
        self.assertIn("chacha20-poly1305",
                      [c["key"] for c in json.loads(base64.b64decode(out["plaintext_base64"]))["changes"]])


class TestGivingUp(DeliveryCase):
    ENV = {"PERCORE_TEST_DELIVERY_TIME_SCALE": "0.00001"}  # the whole schedule in about 0.4 s

    def test_after_its_last_retry_a_batch_fails_the_delivery_with_eight_attempts(self):
        self.receiver.script(default={"status": 500})
        self.create()
        self.write("f1", b"never")
        wait_until(lambda: self.info()["state"] == "failed", timeout=20, what="failed")
        records = self.receiver.requests()
        self.assertEqual(len(records), 8, [r["seq"] for r in records])
        self.assertEqual(len({header(r, "webhook-id") for r in records}), 1)
        info = self.info()
        self.assertEqual((info["last_status"], info["attempts"]), (500, 8))


class TestRetention(DeliveryCase):
    SERVER_ARGS = ("--changes-retention", "1")

    def test_a_delivery_that_falls_behind_the_retention_fails_saying_so(self):
        self.receiver.script(default={"status": 500})
        self.create()
        writes = [0]

        def failed():
            # the retention must really pass: a write each look keeps the retention's checkpoints
            # (at most one a second) moving past the delivery's cursor
            self.write(f"r{writes[0] % 3}", f"v{writes[0]}".encode())
            writes[0] += 1
            return self.info()["state"] == "failed"
        wait_until(failed, timeout=20, interval=0.1, what="the delivery behind the 1 s retention to fail")
        self.assertIn("--changes-retention", self.info()["last_error"])


class TestRestart(unittest.TestCase):
    def test_a_delivery_goes_on_after_a_restart_with_another_shard_count_missing_nothing(self):
        first = env_shards()
        srv = start_server(first, LOOPBACK_RECEIVERS, env=SCALE)
        receiver = Receiver()
        self.addCleanup(receiver.stop)
        app = unique("a")
        model = {}
        try:
            c = srv.conn()
            self.assertEqual(c.put(f"/{app}/k0", b"first").status, 201)
            model["k0"] = b"first"
            r = c.request("PUT", f"/_apps/{app}/deliveries/hook", None,
                          json.dumps({"url": receiver.url + "/hook", "since": "0"}).encode())
            self.assertEqual(r.status, 201, r)
            for i in range(20):
                model[f"k{i}"] = f"before {i}".encode()
                self.assertIn(c.put(f"/{app}/k{i}", model[f"k{i}"]).status, (201, 204))
            c.close()
            self.assertEqual(srv.stop(), 0)
            owner = srv  # holds the data directory until the end
            self.addCleanup(owner.cleanup)
            srv = start_server(3 if first == 1 else 1, LOOPBACK_RECEIVERS, data=owner.data, env=SCALE)
            c = srv.conn()
            for i in range(10, 30):
                model[f"k{i}"] = f"after {i}".encode()
                self.assertIn(c.put(f"/{app}/k{i}", model[f"k{i}"]).status, (201, 204))

            def caught_up():
                seen = delivered_values(receiver)
                return all(seen.get(k) == v for k, v in model.items())
            wait_until(caught_up, timeout=20, what="every write delivered across the resharding")
            info = c.request("GET", f"/_apps/{app}/deliveries/hook").json()
            self.assertEqual(info["state"], "active", info)
        finally:
            srv.stop_and_check()
            srv.cleanup()


    def test_a_sigkill_while_delivering_loses_no_acknowledged_write_after_the_restart(self):
        shards = env_shards()
        srv = start_server(shards, LOOPBACK_RECEIVERS, env=SCALE)
        receiver = Receiver()
        self.addCleanup(receiver.stop)
        receiver.script(default={"status": 200, "delay": 0.05})  # the delivery lags the writes: batches in flight at the kill
        app = unique("a")
        model, written = {}, set()
        try:
            c = srv.conn()
            self.assertEqual(c.put(f"/{app}/_first", b"0").status, 201)
            model["_first"] = b"0"
            r = c.request("PUT", f"/_apps/{app}/deliveries/hook", None,
                          json.dumps({"url": receiver.url + "/hook", "since": "0"}).encode())
            self.assertEqual(r.status, 201, r)
            for i in range(300):
                key, value = f"k{i % 40}", f"v{i}".encode()
                written.add(value)
                if c.put(f"/{app}/{key}", value).status in (201, 204):
                    model[key] = value
            srv.proc.send_signal(signal.SIGKILL)
            srv.proc.wait(10)
            owner = srv  # holds the data directory until the end
            self.addCleanup(owner.cleanup)
            srv = start_server(shards, LOOPBACK_RECEIVERS, data=owner.data, env=SCALE)

            def caught_up():
                seen = delivered_values(receiver)
                return all(seen.get(k) == v for k, v in model.items())
            self.assertLess(len(receiver.requests()), 300, "the kill came while batches were still to send")
            wait_until(caught_up, timeout=30, what="every acknowledged write delivered after the restart")
            for rec in receiver.requests():  # nothing that was never written
                for ch in batch_of(rec)["changes"]:
                    self.assertIn(base64.b64decode(ch["value_base64"]), written | {b"0"})
        finally:
            srv.stop_and_check()
            srv.cleanup()


if __name__ == "__main__":
    unittest.main()
