// `openai` (npm) Responses client against `rehearsal serve`'s Responses API:
// tests/wire/responses.json played as its runtime would, with responses.create (two
// function_call items in one reply), a scripted 429 raised as RateLimitError, the stream
// helper, and the root's last request chained by previous_response_id; the server must then
// judge the run a pass.

import test from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { Served, recorder } from './served.mjs';

const TOOLS = [
  {
    type: 'function',
    name: 'Agent',
    description: 'Delegate a task',
    parameters: { type: 'object', properties: { task: { type: 'string' } } },
    strict: false,
  },
];
const TRUNCATED = 'The logs show nothin...\n[Sub-agent response truncated to 20 chars]';

test('openai: responses plain, streamed, parallel function calls, a 429, usage, previous_response_id', async (t) => {
  const works = recorder('openai', 'Responses', 'tests/node/openai-responses.test.mjs');
  const served = await Served.start('tests/wire/responses.json');
  t.after(() => served.kill());
  const client = new OpenAI({ baseURL: served.baseURL, apiKey: 'rehearsal', maxRetries: 0, timeout: 20000 });
  const instructions = 'You are the root.';

  // Not streamed: the text and two function calls in one reply.
  const first = await client.responses.create({ model: 'rehearsal', instructions, input: 'Check the logs', tools: TOOLS });
  assert.equal(first.output_text, 'Delegating both.');
  works('plain');
  const calls = first.output.filter((item) => item.type === 'function_call');
  assert.equal(calls[0].name, 'Agent');
  assert.deepEqual(JSON.parse(calls[0].arguments), { task: 'Summarise the logs' });
  works('tool calls');
  assert.deepEqual(calls.map((c) => JSON.parse(c.arguments)), [{ task: 'Summarise the logs' }, { task: 'Count the errors' }]);
  assert.notEqual(calls[0].call_id, calls[1].call_id);
  works('parallel calls');
  assert.ok(first.usage.input_tokens > 0 && first.usage.output_tokens > 0, JSON.stringify(first.usage));
  assert.equal(first.usage.total_tokens, first.usage.input_tokens + first.usage.output_tokens);
  works('usage');

  // The first child: a scripted 429, raised as RateLimitError; its retry streamed.
  await assert.rejects(client.responses.create({ model: 'rehearsal', input: 'Summarise the logs' }), (e) => {
    assert.ok(e instanceof OpenAI.RateLimitError, `${e?.constructor?.name}: ${e}`);
    assert.equal(e.status, 429);
    return true;
  });
  works('error status');
  const stream = client.responses.stream({ model: 'rehearsal', input: 'Summarise the logs' });
  let text = '';
  for await (const event of stream) {
    if (event.type === 'response.output_text.delta') text += event.delta;
  }
  const streamed = await stream.finalResponse();
  assert.equal(text, 'The logs show nothing unusual.');
  // The final response of the stream helper carries no `output_text` shortcut: its items do.
  const final = streamed.output
    .filter((item) => item.type === 'message')
    .flatMap((item) => item.content)
    .filter((part) => part.type === 'output_text')
    .map((part) => part.text)
    .join('');
  assert.equal(final, text);
  assert.equal(streamed.status, 'completed');
  works('streaming');

  const second = await client.responses.create({ model: 'rehearsal', input: 'Count the errors' });
  assert.equal(second.output_text, 'No errors.');

  // The root, chained to its first response, handed both results as function_call_output items.
  const last = await client.responses.create({
    model: 'rehearsal',
    instructions,
    previous_response_id: first.id,
    input: [
      { type: 'function_call_output', call_id: calls[0].call_id, output: TRUNCATED },
      { type: 'function_call_output', call_id: calls[1].call_id, output: 'No errors.' },
    ],
    tools: TOOLS,
  });
  assert.equal(last.output_text, 'Done: the logs are fine and hold no errors.');

  const { code, verdict, out } = await served.verdict();
  assert.deepEqual([code, verdict], [0, 'pass'], out);
});
