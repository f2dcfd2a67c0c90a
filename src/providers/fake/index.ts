/**
 * The in-memory fake sandbox provider for tests: the adapter, its state accessors and the
 * conformance fixtures in its script vocabulary.
 */
export { FakeAdapter } from './adapter.ts';
export type { FakeAdapterOptions } from './adapter.ts';
export { reset, policy, file } from './state.ts';
export type { FakeFile } from './state.ts';
export { FAKE_FIXTURES } from './fixtures.ts';
export { parseScript, foldScript } from './script.ts';
export type { Instruction, Folded } from './script.ts';
