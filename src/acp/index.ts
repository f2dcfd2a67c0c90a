/**
 * ACP for the conversation engine: the journal-replayable client, the journal skipper, and their value types.
 * The demo agent lives in ./demo (launch it with `fountain demo-agent`; see demo/launch.ts).
 */
export { AcpClient, requestWriteId } from './client.ts';
export type {
  AcpClientHandler,
  AcpClientOptions,
  AttachOptions,
  Call,
  HeldPermission,
  LineContext,
  PromptHandle,
  PromptReply,
  SessionParams,
} from './client.ts';
export type { AcpError, AcpErrorCode, AcpProblem, AcpProblemCode } from './errors.ts';
export { JournalSkipper, type ReplayError } from './skipper.ts';
export { MAX_LINE_BYTES } from './lines.ts';
export { classifyLine, type AcpMessage, type JsonRpcId } from './message.ts';
export { DEMO_AGENT_SUBCOMMAND, demoAgentArgv, localDemoAgentArgv } from './demo/launch.ts';
export type { PromptUsage } from './schemas.ts';
export { messageUpdateKind } from './schemas.ts';
