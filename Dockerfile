# The Fountain server. Three stages: production dependencies are installed in the first, the second
# compiles src/ into dist/ (scripts/build.mjs, as `npm install` does elsewhere), and only they, the
# sources and dist/ reach the runtime image, which runs as a non-root user. bin/fountain.js runs dist/
# while it matches src/ (same files, same modification times: COPY keeps them), tsx otherwise.
# BASE_IMAGE defaults to the public image; CI builds on a locally made equivalent (no registry is
# reachable there: scripts/images/build-base.sh). Built and run in CI by scripts/images/ci.sh.
ARG BASE_IMAGE=node:20-bookworm-slim
FROM ${BASE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund \
 && npm cache clean --force

# Only what the build reads: esbuild (a dependency), the version (package.json), the compiler settings, the build, its stamp and the runner bundle, src/.
FROM ${BASE_IMAGE} AS build
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY package.json tsconfig.json ./
COPY scripts/build.mjs ./scripts/
COPY bin/dist-stamp.mjs bin/runner-bundle.mjs ./bin/
COPY src ./src
RUN node scripts/build.mjs

FROM ${BASE_IMAGE} AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY package.json tsconfig.json ./
COPY bin ./bin
COPY scripts/build.mjs ./scripts/build.mjs
COPY src ./src
COPY docs ./docs
COPY --from=build /app/dist ./dist
# The migrated embedded-database template `npm install` makes elsewhere (.cache/pglite-template): a
# container's first start copies it instead of running PGlite's initdb.
COPY scripts/make-pglite-template.mjs ./scripts/make-pglite-template.mjs
RUN node scripts/make-pglite-template.mjs
RUN useradd --system --uid 10001 --user-group --home-dir /var/lib/fountain --create-home fountain \
 && chmod 0700 /var/lib/fountain
USER fountain
VOLUME ["/var/lib/fountain"]
EXPOSE 4000
# Ready means the database answers and every migration is applied (docs/configuration.md). A server
# started on another port (with --network host, say) sets FOUNTAIN_HEALTH_URL to match.
ENV FOUNTAIN_HEALTH_URL=http://127.0.0.1:4000/health/ready
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD ["node", "-e", "fetch(process.env.FOUNTAIN_HEALTH_URL).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
ENTRYPOINT ["node", "bin/fountain.js"]
CMD ["server", "--host", "0.0.0.0", "--port", "4000", "--data-dir", "/var/lib/fountain"]
