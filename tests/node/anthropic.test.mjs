// `@anthropic-ai/sdk` against `rehearsal serve`'s Messages API: tests/wire/anthropic.json
// played as its runtime would, with messages.create (two tool_use blocks in one reply),
// a scripted 529 raised as OverloadedError, messages.stream, the beta client (`?beta=true`)
// and countTokens; the server must then judge the run a pass.

import test from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { Served, recorder } from './served.mjs';

const TOOLS = [
  {
    name: 'Agent',
    description: 'Delegate a task',
    input_schema: { type: 'object', properties: { task: { type: 'string' } } },
  },
];
const TRUNCATED = 'The logs show nothin...\n[Sub-agent response truncated to 20 chars]';

test('@anthropic-ai/sdk: messages plain, streamed, parallel tool_use, a 529, usage', async (t) => {
  const works = recorder('@anthropic-ai/sdk', 'Messages', 'tests/node/anthropic.test.mjs');
  const served = await Served.start('tests/wire/anthropic.json');
  t.after(() => served.kill());
  const client = new Anthropic({ baseURL: served.origin, apiKey: 'dummy', maxRetries: 0, timeout: 20000 });
  const system = 'You are the root.';
  const root = [{ role: 'user', content: 'Check the logs' }];

  const counted = await client.messages.countTokens({ model: 'rehearsal', system, messages: root });
  assert.equal(counted.input_tokens, 8);

  // Not streamed: the text and two tool_use blocks in one reply.
  const first = await client.messages.create({ model: 'rehearsal', max_tokens: 1024, system, messages: root, tools: TOOLS });
  assert.deepEqual(first.content.map((b) => b.type), ['text', 'tool_use', 'tool_use']);
  assert.equal(first.content[0].text, 'Delegating both.');
  works('plain');
  assert.equal(first.stop_reason, 'tool_use');
  const calls = first.content.slice(1);
  assert.deepEqual(calls[0].input, { task: 'Summarise the logs' });
  assert.equal(calls[0].name, 'Agent');
  works('tool calls');
  assert.deepEqual(calls.map((c) => c.input), [{ task: 'Summarise the logs' }, { task: 'Count the errors' }]);
  assert.notEqual(calls[0].id, calls[1].id);
  works('parallel calls');
  assert.ok(first.usage.input_tokens > 0 && first.usage.output_tokens > 0, JSON.stringify(first.usage));
  works('usage');

  // The first child: a scripted 529, raised as the SDK's OverloadedError; its retry streamed.
  const child = [{ role: 'user', content: 'Summarise the logs' }];
  await assert.rejects(client.messages.create({ model: 'rehearsal', max_tokens: 1024, messages: child }), (e) => {
    assert.ok(e instanceof Anthropic.OverloadedError, `${e?.constructor?.name}: ${e}`);
    assert.equal(e.status, 529);
    assert.equal(e.error?.error?.type, 'overloaded_error');
    return true;
  });
  works('error status');
  const stream = client.messages.stream({ model: 'rehearsal', max_tokens: 1024, messages: child });
  let text = '';
  stream.on('text', (piece) => (text += piece));
  const streamed = await stream.finalMessage();
  assert.equal(text, 'The logs show nothing unusual.');
  assert.equal(streamed.stop_reason, 'end_turn');
  works('streaming');

  // The second child through the beta client (`?beta=true`).
  const second = await client.beta.messages.create({
    model: 'rehearsal',
    max_tokens: 1024,
    messages: [{ role: 'user', content: 'Count the errors' }],
    betas: ['claude-code-20250219'],
  });
  assert.equal(second.content[0].text, 'No errors.');

  // The root, handed both results as tool_result blocks; streamed, accumulated by the SDK.
  root.push(
    { role: 'assistant', content: first.content },
    {
      role: 'user',
      content: [
        { type: 'tool_result', tool_use_id: calls[0].id, content: TRUNCATED },
        { type: 'tool_result', tool_use_id: calls[1].id, content: [{ type: 'text', text: 'No errors.' }] },
      ],
    },
  );
  const last = await client.messages.stream({ model: 'rehearsal', max_tokens: 1024, system, messages: root, tools: TOOLS }).finalMessage();
  assert.equal(last.content[0].text, 'Done: the logs are fine and hold no errors.');

  const { code, verdict, out } = await served.verdict();
  assert.deepEqual([code, verdict], [0, 'pass'], out);
});

test('@anthropic-ai/sdk: a streamed reply with two tool_use blocks is accumulated by the SDK', async (t) => {
  const served = await Served.start('tests/wire/anthropic.json', { idleLimit: '1s' });
  t.after(() => served.kill());
  const client = new Anthropic({ baseURL: served.origin, apiKey: 'dummy', maxRetries: 0, timeout: 20000 });
  const message = await client.messages
    .stream({
      model: 'rehearsal',
      max_tokens: 1024,
      system: 'You are the root.',
      messages: [{ role: 'user', content: 'Check the logs' }],
      tools: TOOLS,
    })
    .finalMessage();
  assert.equal(message.stop_reason, 'tool_use');
  assert.deepEqual(
    message.content.map((b) => [b.type, b.input ?? null]),
    [
      ['text', null],
      ['tool_use', { task: 'Summarise the logs' }],
      ['tool_use', { task: 'Count the errors' }],
    ],
  );
  await served.verdict();
});
