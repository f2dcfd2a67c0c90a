import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Command } from 'commander';
import { SUBCOMMANDS, modulesFor } from './commands.ts';

describe('the subcommand table', () => {
  it('names exactly the commands and aliases each module registers', async () => {
    for (const m of SUBCOMMANDS) {
      const program = new Command('fountain');
      (await m.load()).register(program);
      const names = program.commands.flatMap((c) => [c.name(), ...c.aliases()]);
      assert.deepEqual(names.sort(), [...m.commands].sort());
    }
  });

  it('loads only the module of the command a command line names', () => {
    const only = (args: string[]) => modulesFor(args).map((m) => m.commands[0]);
    assert.deepEqual(only(['runner-guest', '--serial', '/dev/virtio-ports/fountain']), ['runner-guest']);
    assert.deepEqual(only(['--profile', 'chat', 'conv', 'list']), ['conversations']);
    assert.deepEqual(only(['--profile=work', 'agent', 'list']), ['agents']);
    assert.deepEqual(only(['--version']), []);
    // Help and unknown words need every command registered to list them or suggest one.
    assert.equal(modulesFor([]).length, SUBCOMMANDS.length);
    assert.equal(modulesFor(['--help']).length, SUBCOMMANDS.length);
    assert.equal(modulesFor(['help', 'runner']).length, SUBCOMMANDS.length);
    assert.equal(modulesFor(['runer']).length, SUBCOMMANDS.length);
  });
});
