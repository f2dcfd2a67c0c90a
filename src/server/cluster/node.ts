/**
 * A server node's identity: minted once per process by the composition root and shared by the
 * runner host, the bus bridge, the engine's ownership rows and its logs.
 */
import { randomBytes } from 'node:crypto';

export const mintNodeId = (): string => randomBytes(8).toString('hex');
