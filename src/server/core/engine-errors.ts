/**
 * The engine's refusals as values: an API error code, its HTTP status and the extras it carries.
 * The HTTP layer maps these in one place; the engine never builds a response itself.
 */
export type EngineErrorCode =
  | 'not_found'
  | 'conversation_busy'
  | 'invalid_status'
  | 'no_runner_online'
  | 'no_turn_running'
  | 'permission_request_resolved'
  | 'conversation_terminated'
  | 'sandbox_provider_disabled'
  | 'permission_policy_widens'
  | 'no_agent'
  | 'unknown_option'
  | 'option_id_required'
  | 'provisioning'
  | 'sandbox_probe_failed'
  | 'runner_offline'
  | 'runner_deleted'
  | 'server_node_unreachable'
  | 'backend_lacks_network_policy'
  | 'inference_credential_missing'
  | 'inference_credential_unreadable'
  | 'environment_not_found'
  | 'environment_not_allowed'
  | 'gateway_unreachable'
  | 'turn_not_found'
  | 'turn_not_completed'
  | 'no_checkpoint'
  | 'runner_not_found'
  | 'already_there'
  | 'checkpoint_failed'
  | 'session_option_not_listed'
  | 'session_option_value_not_listed'
  | 'session_mode_not_listed'
  | 'session_setting_failed'
  | 'no_repository'
  | 'repository_not_in_environment'
  | 'branch_not_found'
  | 'branch_exists'
  | 'remote_unreachable'
  | 'remote_auth_failed'
  | 'secret_unreadable'
  | 'sandbox_not_ready'
  | 'nothing_to_push'
  | 'push_failed'
  | 'image_not_supported_by_runtime'
  | 'images_unavailable'
  | 'model_not_for_runtime'
  | 'model_not_allowed';

export const ENGINE_ERROR_STATUS: Readonly<Record<EngineErrorCode, number>> = {
  not_found: 404,
  conversation_busy: 400,
  invalid_status: 400,
  no_runner_online: 409,
  no_turn_running: 409,
  permission_request_resolved: 409,
  conversation_terminated: 410,
  sandbox_provider_disabled: 422,
  permission_policy_widens: 422,
  no_agent: 422,
  unknown_option: 422,
  option_id_required: 422,
  provisioning: 503,
  sandbox_probe_failed: 503,
  runner_offline: 503,
  runner_deleted: 409,
  server_node_unreachable: 503,
  backend_lacks_network_policy: 422,
  inference_credential_missing: 422,
  inference_credential_unreadable: 422,
  environment_not_found: 404,
  environment_not_allowed: 422,
  gateway_unreachable: 422,
  turn_not_found: 404,
  turn_not_completed: 409,
  no_checkpoint: 409,
  runner_not_found: 404,
  already_there: 409,
  checkpoint_failed: 503,
  session_option_not_listed: 422,
  session_option_value_not_listed: 422,
  session_mode_not_listed: 422,
  session_setting_failed: 502,
  no_repository: 422,
  repository_not_in_environment: 422,
  branch_not_found: 422,
  branch_exists: 409,
  remote_unreachable: 502,
  remote_auth_failed: 502,
  secret_unreadable: 409,
  sandbox_not_ready: 409,
  nothing_to_push: 409,
  push_failed: 502,
  image_not_supported_by_runtime: 422,
  images_unavailable: 503,
  model_not_for_runtime: 422,
  model_not_allowed: 422,
};

/** Seconds for `Retry-After`. */
export const ENGINE_RETRY_AFTER: Partial<Readonly<Record<EngineErrorCode, number>>> = {
  provisioning: 30,
  sandbox_probe_failed: 10,
  runner_offline: 30,
  server_node_unreachable: 5,
};

export interface EngineError {
  readonly code: EngineErrorCode;
  readonly message: string;
  /** Fields the API error body carries beside `error` and `message`. */
  readonly extras?: Readonly<Record<string, unknown>>;
  /** The HTTP status when it differs from the code's usual one (a new conversation on an away runner is 409, not 503). */
  readonly status?: number;
}

export type EngineResult<T> =
  | { readonly ok: true; readonly value: T }
  | { readonly ok: false; readonly error: EngineError };

export const refuse = (
  code: EngineErrorCode,
  message: string,
  extras?: Readonly<Record<string, unknown>>,
): { ok: false; error: EngineError } => ({
  ok: false,
  error: extras ? { code, message, extras } : { code, message },
});
export const accept = <T>(value: T): { ok: true; value: T } => ({ ok: true, value });
