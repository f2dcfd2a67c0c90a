/**
 * Where a sandbox's home is, on every provider: the agent's HOME and cwd, and the path commands and
 * file operations name. The path is the one Sprites gave it, kept so stored sandboxes and sessions stay valid.
 */
export const SANDBOX_HOME = '/home/sprite';
