-- Images sent with a prompt: each turn names its images (blob digest, media type, size, in order); the
-- bytes are in the blob store, kept while a turn names them. A conversation remembers whether its
-- agent advertised image prompts (ACP promptCapabilities.image) at its last initialize; NULL: not yet known.
ALTER TABLE turns ADD COLUMN images jsonb NOT NULL DEFAULT '[]'::jsonb;
ALTER TABLE conversations ADD COLUMN accepts_images boolean;
