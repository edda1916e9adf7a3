"""The shim under httpx (what the `openai` SDK posts with): timeouts built on anyio's cancel
scopes fire at the exact virtual instant. Skipped when httpx is not installed (the shim's
own tests are stdlib only); `run_tests.sh --with-httpx` makes a virtual environment with it."""

import importlib.util
import textwrap
import unittest

from fake_harness import FakeHarness
from test_shim import run_runtime

CLIENT = textwrap.dedent("""
    import asyncio, json, os, httpx
    async def main():
        loop = asyncio.get_running_loop()
        out = []
        async with httpx.AsyncClient(base_url="http://" + os.environ["MODEL"], timeout=10) as client:
            for latency in ["9999", "30000", "10000", "500"]:
                start = loop.time()
                try:
                    response = await client.post("/v1/chat/completions", json={"model": "m"},
                                                 headers={"X-Latency-Ms": latency})
                    out.append([latency, response.text, round(loop.time() - start, 9)])
                except httpx.TimeoutException as error:
                    out.append([latency, type(error).__name__, round(loop.time() - start, 9)])
        print(json.dumps(out))
    asyncio.run(main())
    """)


@unittest.skipIf(importlib.util.find_spec("httpx") is None, "httpx is not installed")
class Httpx(unittest.TestCase):
    def test_httpx_timeouts_and_replies_land_on_exact_virtual_instants_in_every_run(self):
        transcripts = []
        for _ in range(3):
            harness = FakeHarness()
            try:
                out, _ = run_runtime(CLIENT, harness)
                harness.wait_ended()
                transcripts.append(harness.transcript)
            finally:
                harness.close()
            self.assertEqual(
                out,
                [["9999", "ok", 9.999], ["30000", "ReadTimeout", 10.0], ["10000", "ReadTimeout", 10.0],
                 ["500", "ok", 0.5]],
            )
        self.assertIn("19.999s closed c1", transcripts[0])
        self.assertEqual(transcripts[1], transcripts[0])
        self.assertEqual(transcripts[2], transcripts[0])


if __name__ == "__main__":
    unittest.main()
