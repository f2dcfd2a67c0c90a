import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  DockerfileSyntaxError,
  finalUser,
  globalArgs,
  keyValues,
  parseDockerfile,
  parseFrom,
  parseHealthcheck,
  stages,
  words,
} from './dockerfile.ts';

const SAMPLE = `# syntax comment
ARG BASE=node:20
FROM node:20-bookworm-slim AS deps
RUN apt-get update \\
 # a comment inside a continuation
 && apt-get install -y git
from ubuntu:24.04@sha256:abc
COPY --from=deps --chown=1000:1000 /app ./app
ENV A=1 B="two words" C=with\\ space
ENV LEGACY value with spaces
USER sprite:sprite
HEALTHCHECK --interval=30s --retries=3 CMD ["node", "-e", "1"]
CMD sleep infinity
`;

describe('minimal Dockerfile parser', () => {
  const ins = parseDockerfile(SAMPLE);

  it('reads instructions, joins continuations, drops comments and keeps start lines', () => {
    assert.deepEqual(
      ins.map((i) => [i.keyword, i.line]),
      [
        ['ARG', 2],
        ['FROM', 3],
        ['RUN', 4],
        ['FROM', 7],
        ['COPY', 8],
        ['ENV', 9],
        ['ENV', 10],
        ['USER', 11],
        ['HEALTHCHECK', 12],
        ['CMD', 13],
      ],
    );
    assert.equal(ins[2]!.args, 'apt-get update  && apt-get install -y git');
  });

  it('separates flags from arguments and recognises the exec form', () => {
    assert.deepEqual(ins[4]!.flags, { from: 'deps', chown: '1000:1000' });
    assert.equal(ins[4]!.args, '/app ./app');
    assert.equal(ins[9]!.exec, null);
    const hc = parseHealthcheck(ins[8]!);
    assert.deepEqual(hc, {
      options: { interval: '30s', retries: '3' },
      command: { exec: ['node', '-e', '1'], shell: null },
    });
    assert.deepEqual(parseHealthcheck({ ...ins[8]!, flags: {}, args: 'NONE' }).command, null);
    assert.deepEqual(parseHealthcheck({ ...ins[8]!, flags: {}, args: 'CMD curl -f http://x/' }).command, {
      exec: null,
      shell: 'curl -f http://x/',
    });
  });

  it('reads FROM references with tags, digests, registries and stage names', () => {
    assert.deepEqual(parseFrom(ins[1]!), { image: 'node', tag: '20-bookworm-slim', digest: null, stage: 'deps' });
    assert.deepEqual(parseFrom(ins[3]!), { image: 'ubuntu', tag: '24.04', digest: 'sha256:abc', stage: null });
    const reg = parseDockerfile('FROM localhost:5000/team/img AS x\n')[0]!;
    assert.deepEqual(parseFrom(reg), { image: 'localhost:5000/team/img', tag: null, digest: null, stage: 'x' });
  });

  it('resolves a FROM that names a global ARG to its default, and refuses an ARG without one', () => {
    const text =
      'ARG BASE_IMAGE=node:20-bookworm-slim\nARG BARE\nFROM ${BASE_IMAGE} AS deps\nFROM $BASE_IMAGE\nFROM ${BARE}\n';
    const parsed = parseDockerfile(text);
    const args = globalArgs(parsed);
    assert.deepEqual(
      [...args],
      [
        ['BASE_IMAGE', 'node:20-bookworm-slim'],
        ['BARE', undefined],
      ],
    );
    assert.deepEqual(parseFrom(parsed[2]!, args), {
      image: 'node',
      tag: '20-bookworm-slim',
      digest: null,
      stage: 'deps',
    });
    assert.deepEqual(parseFrom(parsed[3]!, args).tag, '20-bookworm-slim');
    assert.throws(() => parseFrom(parsed[4]!, args), DockerfileSyntaxError);
    assert.throws(() => parseFrom(parsed[2]!), DockerfileSyntaxError, 'without the ARGs the reference is unknown');
  });

  it('reads ENV pairs with quotes and escapes, and the legacy form', () => {
    assert.deepEqual(keyValues(ins[5]!), [
      ['A', '1'],
      ['B', 'two words'],
      ['C', 'with space'],
    ]);
    assert.deepEqual(keyValues(ins[6]!), [['LEGACY', 'value with spaces']]);
    assert.deepEqual(keyValues(ins[0]!), [['BASE', 'node:20']]);
    assert.deepEqual(words(`a 'b c' "d \\" e" f\\ g`), ['a', 'b c', 'd " e', 'f g']);
  });

  it('splits stages and tells the final user', () => {
    const s = stages(ins);
    assert.equal(s.length, 2);
    assert.equal(finalUser(s[0]!), 'root');
    assert.equal(finalUser(s[1]!), 'sprite');
  });

  it('refuses what it cannot read', () => {
    const bad = [
      'RUN echo hi\n',
      'FROM a\nFRM b\n',
      'FROM a\nRUN x \\\n',
      'FROM a\nUSER\n',
      'FROM a\nRUN <<EOF\nx\nEOF\n',
      'FROM a\nHEALTHCHECK --interval=1s\n',
      'WORKDIR /x\nFROM a\n',
    ];
    for (const text of bad) {
      assert.throws(
        () => {
          const parsed = parseDockerfile(text);
          stages(parsed);
          for (const i of parsed) if (i.keyword === 'HEALTHCHECK') parseHealthcheck(i);
        },
        DockerfileSyntaxError,
        JSON.stringify(text),
      );
    }
  });
});
