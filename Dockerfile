# The Fountain server. Three stages: production dependencies are installed in the first, the second
# compiles src/ into dist/ (scripts/build.mjs, as `npm install` does elsewhere), and only they, the
# sources and dist/ reach the runtime image, which runs as a non-root user. bin/fountain.js runs dist/
# while it matches src/ (same files, same modification times: COPY keeps them), tsx otherwise.
# Not built on the development machines (no Docker engine there); a test lints it.
FROM node:20-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund \
 && npm cache clean --force

# Only what the build reads: esbuild (a dependency), the compiler settings, the build and its stamp, src/.
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY tsconfig.json ./
COPY scripts/build.mjs ./scripts/
COPY bin/dist-stamp.mjs bin/runner-bundle.mjs ./bin/
COPY src ./src
RUN node scripts/build.mjs

FROM node:20-bookworm-slim AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY package.json tsconfig.json ./
COPY bin ./bin
COPY scripts/build.mjs ./scripts/build.mjs
COPY src ./src
COPY docs ./docs
COPY --from=build /app/dist ./dist
RUN useradd --system --uid 10001 --user-group --home-dir /var/lib/fountain --create-home fountain \
 && chmod 0700 /var/lib/fountain
USER fountain
VOLUME ["/var/lib/fountain"]
EXPOSE 4000
# Ready means the database answers and every migration is applied (docs/configuration.md).
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:4000/health/ready').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
ENTRYPOINT ["node", "bin/fountain.js"]
CMD ["server", "--host", "0.0.0.0", "--port", "4000", "--data-dir", "/var/lib/fountain"]
