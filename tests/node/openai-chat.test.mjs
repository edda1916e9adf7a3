// `openai` (npm) Chat Completions against `rehearsal serve`: tests/wire/anthropic.json (the
// scenario is the same whatever the API) played as its runtime would, with
// chat.completions.create (two tool calls in one reply), a scripted 529 raised as
// InternalServerError with its status, a streamed reply with usage, and a streamed final
// answer; the server must then judge the run a pass. And a scripted 429 (tests/node/
// rate-limit.json), raised as RateLimitError.

import test from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { Served, recorder } from './served.mjs';

const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'Agent',
      description: 'Delegate a task',
      parameters: { type: 'object', properties: { task: { type: 'string' } } },
    },
  },
];
const TRUNCATED = 'The logs show nothin...\n[Sub-agent response truncated to 20 chars]';

test('openai: chat completions plain, streamed, parallel tool calls, a 529, usage', async (t) => {
  const works = recorder('openai', 'Chat Completions', 'tests/node/openai-chat.test.mjs');
  const served = await Served.start('tests/wire/anthropic.json');
  t.after(() => served.kill());
  const client = new OpenAI({ baseURL: served.baseURL, apiKey: 'rehearsal', maxRetries: 0, timeout: 20000 });
  const root = [
    { role: 'system', content: 'You are the root.' },
    { role: 'user', content: 'Check the logs' },
  ];

  // Not streamed: the text and two tool calls in one reply.
  const first = await client.chat.completions.create({ model: 'rehearsal', messages: root, tools: TOOLS });
  const message = first.choices[0].message;
  assert.equal(message.content, 'Delegating both.');
  works('plain');
  assert.equal(first.choices[0].finish_reason, 'tool_calls');
  const calls = message.tool_calls;
  assert.equal(calls[0].function.name, 'Agent');
  assert.deepEqual(JSON.parse(calls[0].function.arguments), { task: 'Summarise the logs' });
  works('tool calls');
  assert.deepEqual(calls.map((c) => JSON.parse(c.function.arguments)), [{ task: 'Summarise the logs' }, { task: 'Count the errors' }]);
  assert.notEqual(calls[0].id, calls[1].id);
  works('parallel calls');
  assert.ok(first.usage.prompt_tokens > 0 && first.usage.completion_tokens > 0, JSON.stringify(first.usage));

  // The first child: a scripted 529, raised with its status; its retry streamed with usage.
  const child = [{ role: 'user', content: 'Summarise the logs' }];
  await assert.rejects(client.chat.completions.create({ model: 'rehearsal', messages: child }), (e) => {
    assert.ok(e instanceof OpenAI.InternalServerError, `${e?.constructor?.name}: ${e}`);
    assert.equal(e.status, 529);
    return true;
  });
  const chunks = [];
  const stream = await client.chat.completions.create({
    model: 'rehearsal',
    messages: child,
    stream: true,
    stream_options: { include_usage: true },
  });
  for await (const chunk of stream) chunks.push(chunk);
  const text = chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('');
  assert.equal(text, 'The logs show nothing unusual.');
  works('streaming');
  const usage = chunks.at(-1).usage;
  assert.deepEqual(chunks.at(-1).choices, []);
  assert.ok(usage.completion_tokens > 0 && usage.total_tokens === usage.prompt_tokens + usage.completion_tokens);
  works('usage');

  const second = await client.chat.completions.create({ model: 'rehearsal', messages: [{ role: 'user', content: 'Count the errors' }] });
  assert.equal(second.choices[0].message.content, 'No errors.');

  // The root, handed both results; streamed, accumulated by the SDK's helper.
  root.push(message, { role: 'tool', tool_call_id: calls[0].id, content: TRUNCATED }, { role: 'tool', tool_call_id: calls[1].id, content: 'No errors.' });
  const last = await client.chat.completions.stream({ model: 'rehearsal', messages: root, tools: TOOLS }).finalContent();
  assert.equal(last, 'Done: the logs are fine and hold no errors.');

  const { code, verdict, out } = await served.verdict();
  assert.deepEqual([code, verdict], [0, 'pass'], out);
});

test('openai: a scripted 429 is raised as RateLimitError with the API error object', async (t) => {
  const works = recorder('openai', 'Chat Completions', 'tests/node/openai-chat.test.mjs');
  const served = await Served.start('tests/node/rate-limit.json');
  t.after(() => served.kill());
  const client = new OpenAI({ baseURL: served.baseURL, apiKey: 'rehearsal', maxRetries: 0, timeout: 20000 });
  const root = [{ role: 'user', content: 'Check the logs' }];
  await assert.rejects(client.chat.completions.create({ model: 'rehearsal', messages: root }), (e) => {
    assert.ok(e instanceof OpenAI.RateLimitError, `${e?.constructor?.name}: ${e}`);
    assert.equal(e.status, 429);
    assert.equal(e.type, 'requests');
    assert.match(e.message, /Rate limit reached/);
    return true;
  });
  works('error status');
  const retried = await client.chat.completions.create({ model: 'rehearsal', messages: root });
  assert.equal(retried.choices[0].message.content, 'Answered on the retry.');
  const { code, verdict, out } = await served.verdict();
  assert.deepEqual([code, verdict], [0, 'pass'], out);
});
