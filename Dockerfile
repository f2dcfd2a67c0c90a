# The Fountain server. Two stages: production dependencies are installed in the first, and only
# they and the sources (run by tsx, no build step) reach the runtime image, which runs as a
# non-root user. Not built on the development machines (no Docker engine there); a test lints it.
FROM node:20-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund \
 && npm cache clean --force

FROM node:20-bookworm-slim AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY package.json ./
COPY bin ./bin
COPY src ./src
COPY docs ./docs
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
