"""The shim against a fake harness: each test runs a small runtime in a fresh interpreter with
``PYTHONPATH=shims/python`` and ``REHEARSAL_CLOCK`` set, as ``rehearsal drive --clock`` will,
and the runtime's code does not import the shim."""

import json
import os
import subprocess
import sys
import textwrap
import time
import unittest

from fake_harness import FakeHarness, S

SHIM = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EPOCH_NS = 1_735_689_600 * S


def run_runtime(code, harness=None, timeout=30):
    """Runs `code` under the shim; returns (parsed last stdout line, the process result)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = SHIM + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONHASHSEED"] = "0"
    if harness is not None:
        env["REHEARSAL_CLOCK"] = harness.clock_addr
        env["MODEL"] = harness.http_addr
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
        timeout=timeout, start_new_session=True,
    )
    if result.returncode != 0:
        raise AssertionError(f"the runtime failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1]), result


HTTP_CLIENT = """
import asyncio, json, os, time

async def post(latency, timeout, stream=False):
    host, port = os.environ["MODEL"].split(":")
    loop = asyncio.get_running_loop()
    reader, writer = await asyncio.open_connection(host, int(port))
    body = b'{"model":"m"}'
    writer.write(b"POST /v1/chat/completions HTTP/1.1\\r\\nHost: x\\r\\nX-Latency-Ms: %s\\r\\n%s"
                 b"Content-Length: %d\\r\\n\\r\\n%s" % (latency.encode(), b"X-Stream: 1\\r\\n" if stream else b"",
                 len(body), body))
    async def read():
        head = await reader.readuntil(b"\\r\\n\\r\\n")
        if stream:
            text = b""
            while not text.endswith(b"0\\r\\n\\r\\n"):
                text += await reader.read(65536)
            return text.count(b"data:")
        return (await reader.readexactly(2)).decode()
    try:
        answer = await asyncio.wait_for(read(), timeout)
    except asyncio.TimeoutError:
        answer = "timeout"
    writer.close()
    return answer, loop.time()
"""


class VirtualTime(unittest.TestCase):
    def setUp(self):
        self.harness = FakeHarness()

    def tearDown(self):
        self.harness.close()

    def test_a_120_second_sleep_ends_at_virtual_120_in_well_under_a_second(self):
        out, _ = run_runtime(
            """
            import asyncio, json, time
            async def main():
                loop = asyncio.get_running_loop()
                start = time.perf_counter()
                await asyncio.sleep(120)
                print(json.dumps({"loop": loop.time(), "wall": time.perf_counter() - start, "time": time.time()}))
            asyncio.run(main())
            """,
            self.harness,
        )
        self.assertEqual(out["loop"], 120.0)
        self.assertEqual(out["time"], EPOCH_NS / S + 120.0)
        self.assertLess(out["wall"], 1.0)

    def test_wait_for_times_out_at_exactly_the_virtual_instant(self):
        out, _ = run_runtime(
            """
            import asyncio, json
            async def main():
                loop = asyncio.get_running_loop()
                try:
                    await asyncio.wait_for(asyncio.Event().wait(), 10)
                except asyncio.TimeoutError:
                    first = loop.time()
                try:
                    async with asyncio.timeout(2.5):
                        await asyncio.Event().wait()
                except TimeoutError:
                    second = loop.time()
                print(json.dumps([first, second]))
            asyncio.run(main())
            """,
            self.harness,
        )
        self.assertEqual(out, [10.0, 12.5])

    def test_a_deadline_a_float_hair_past_an_instant_fires_at_that_instant(self):
        out, _ = run_runtime(
            """
            import asyncio, json
            async def main():
                loop = asyncio.get_running_loop()
                await asyncio.sleep(9.999)
                try:
                    await asyncio.wait_for(asyncio.Event().wait(), 10)
                except asyncio.TimeoutError:
                    print(json.dumps(round(loop.time(), 9)))
            asyncio.run(main())
            """,
            self.harness,
        )
        self.assertEqual(out, 19.999)
        self.harness.wait_ended()
        advances = [line for line in self.harness.transcript if "advance" in line]
        self.assertEqual(advances, ["0.000s advance to 9.999s", "9.999s advance to 19.999s"])

    def test_an_executor_call_does_not_make_the_runtime_look_idle(self):
        out, _ = run_runtime(
            """
            import asyncio, json, time
            async def main():
                loop = asyncio.get_running_loop()
                timer = asyncio.ensure_future(asyncio.sleep(100))
                await loop.run_in_executor(None, time.sleep, 0.3)
                after_thread = loop.time()
                await loop.getaddrinfo("localhost", 80)
                after_lookup = loop.time()
                await asyncio.to_thread(time.sleep, 0.1)
                after_to_thread = loop.time()
                await timer
                print(json.dumps([after_thread, after_lookup, after_to_thread, loop.time()]))
            asyncio.run(main())
            """,
            self.harness,
        )
        self.assertEqual(out, [0.0, 0.0, 0.0, 100.0], "virtual time moved while a thread worked")

    def test_a_model_call_slower_than_its_timeout_is_given_up_at_the_timeout(self):
        out, _ = run_runtime(HTTP_CLIENT + "\nprint(json.dumps(asyncio.run(post('30000', 10))))", self.harness)
        self.assertEqual(out, ["timeout", 10.0])
        self.harness.wait_ended()
        self.assertIn("10.000s closed c1", self.harness.transcript)

    def test_a_reply_a_millisecond_before_the_timeout_is_taken(self):
        out, _ = run_runtime(HTTP_CLIENT + "\nprint(json.dumps(asyncio.run(post('9999', 10))))", self.harness)
        self.assertEqual(out, ["ok", 9.999])

    def test_a_reply_and_a_timeout_at_the_same_instant_go_to_the_timeout(self):
        out, _ = run_runtime(HTTP_CLIENT + "\nprint(json.dumps(asyncio.run(post('10000', 10))))", self.harness)
        self.assertEqual(out, ["timeout", 10.0])

    def test_a_streamed_reply_is_counted_when_its_last_chunk_is_read(self):
        code = HTTP_CLIENT + textwrap.dedent("""
            async def main():
                first = await post("2000", 10, stream=True)
                second = await post("3000", 10)
                await asyncio.sleep(1)
                return [first, second, asyncio.get_running_loop().time()]
            print(json.dumps(asyncio.run(main())))
            """)
        out, _ = run_runtime(code, self.harness)
        self.assertEqual(out, [[3, 2.0], ["ok", 5.0], 6.0])

    def test_a_runtime_exiting_after_executor_work_is_never_called_stuck(self):
        for _ in range(5):
            harness = FakeHarness()
            try:
                run_runtime(
                    """
                    import asyncio, json
                    async def main():
                        await asyncio.get_running_loop().run_in_executor(None, sum, [1, 2])
                        await asyncio.sleep(1)
                        print(json.dumps("done"))
                    asyncio.run(main())
                    """,
                    harness,
                )
                harness.wait_ended()
                self.assertEqual(harness.transcript, ["0.000s hello", "0.000s advance to 1.000s", "1.000s disconnected"])
            finally:
                harness.close()

    def test_loops_run_one_after_another_share_the_clock_and_time_continues(self):
        out, _ = run_runtime(
            """
            import asyncio, json
            first = asyncio.new_event_loop()
            first.run_until_complete(asyncio.sleep(5))
            # Left open; the next loop takes the clock over.
            async def later():
                await asyncio.sleep(2)
                return asyncio.get_running_loop().time()
            print(json.dumps([first.time(), asyncio.run(later())]))
            """,
            self.harness,
        )
        self.assertEqual(out, [5.0, 7.0])

    def test_the_wall_clock_and_randomness_are_the_same_in_every_run(self):
        code = """
            import datetime, json, random, time, uuid
            now = datetime.datetime.now(datetime.timezone.utc)
            print(json.dumps({
                "now": now.isoformat(), "today": datetime.date.today().isoformat(),
                "utc": datetime.datetime.utcnow().isoformat(),
                "is_datetime": isinstance(now, datetime.datetime),
                "random": random.random(), "uuid": str(uuid.uuid4()), "ctime": time.ctime(),
            }))
            """
        first, _ = run_runtime(code, self.harness)
        self.harness.close()
        self.harness = FakeHarness()
        second, _ = run_runtime(code, self.harness)
        self.assertEqual(first, second)
        self.assertEqual(first["now"], "2025-01-01T00:00:00+00:00")
        self.assertEqual(first["utc"], "2025-01-01T00:00:00")
        self.assertTrue(first["is_datetime"])

    def test_repeated_runs_of_a_timeout_give_identical_transcripts(self):
        transcripts = []
        for _ in range(5):
            harness = FakeHarness()
            try:
                run_runtime(HTTP_CLIENT + "\nprint(json.dumps(asyncio.run(post('30000', 10))))", harness)
                harness.wait_ended()
                transcripts.append(harness.transcript)
            finally:
                harness.close()
        self.assertEqual(transcripts[0][:3], ["0.000s hello", "0.000s advance to 10.000s", "10.000s closed c1"])
        for transcript in transcripts[1:]:
            self.assertEqual(transcript, transcripts[0])


class WithoutTheClock(unittest.TestCase):
    def test_without_rehearsal_clock_the_shim_changes_nothing(self):
        out, _ = run_runtime(
            """
            import asyncio, json, time
            async def main():
                return type(asyncio.get_running_loop()).__name__, time.time()
            print(json.dumps(asyncio.run(main())))
            """
        )
        self.assertEqual(out[0], "_UnixSelectorEventLoop")
        self.assertLess(abs(out[1] - time.time()), 60)

    def test_an_unreachable_harness_ends_the_runtime_with_a_clear_message(self):
        env = dict(os.environ, PYTHONPATH=SHIM, REHEARSAL_CLOCK="127.0.0.1:1")
        result = subprocess.run([sys.executable, "-c", "print('ran')"], env=env, capture_output=True, text=True, timeout=30)
        self.assertEqual(result.returncode, 3)
        self.assertIn("rehearsal_clock: cannot reach the clock at 127.0.0.1:1", result.stderr)
        self.assertNotIn("ran", result.stdout)


if __name__ == "__main__":
    unittest.main()
