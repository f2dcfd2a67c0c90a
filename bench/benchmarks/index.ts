/**
 * Every benchmark, in the order `npm run bench` runs them.
 * Names are what the command line accepts.
 */
import type { Benchmark } from '../lib/bench.ts';
import { checkpointBenchmark } from './checkpoint.ts';
import { concurrencyBenchmark } from './concurrency.ts';
import { connectionsBenchmark } from './connections.ts';
import { execBenchmark } from './exec.ts';
import { firstAnswerBenchmark, wakeBenchmark } from './firstanswer.ts';
import { gatewayBenchmark } from './gateway.ts';
import { ingestBenchmark } from './ingest.ts';
import { lifecycleBenchmark } from './lifecycle.ts';
import { listingBenchmark } from './listing.ts';
import { memoryBenchmark } from './memory.ts';
import { netcutsBenchmark } from './netcuts.ts';
import { parkedBenchmark } from './parked.ts';
import { turnBenchmark } from './turn.ts';
import { replayBenchmark } from './replay.ts';
import { startupBenchmark } from './startup.ts';
import { streamBenchmark } from './stream.ts';

export const BENCHMARKS: readonly Benchmark[] = [
  execBenchmark,
  streamBenchmark,
  replayBenchmark,
  turnBenchmark,
  ingestBenchmark,
  concurrencyBenchmark,
  lifecycleBenchmark,
  connectionsBenchmark,
  memoryBenchmark,
  startupBenchmark,
  listingBenchmark,
  netcutsBenchmark,
  gatewayBenchmark,
  checkpointBenchmark,
  firstAnswerBenchmark,
  wakeBenchmark,
  // Last: it leaves 1,000 parked conversations in the shared rig.
  parkedBenchmark,
];
