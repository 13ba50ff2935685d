# svcproxy's image: one program for every role (ingress, sidecar, ratelimit, up, validate, ...),
# chosen by the first argument. deploy/kubernetes/ runs it; docs/deploy.md says how to build it.
#
#   docker build -t svcproxy:0.1.0 .
#   docker run --rm svcproxy:0.1.0 validate --config /etc/svcproxy
#
# Two stages: the first installs every dependency and compiles dist/ (the README's install:
# npm ci, then the build), then drops the development dependencies; the second keeps only what
# runs: bin/, dist/, proto/ (the wire formats read at run time), package.json and the production
# node_modules. Pin the base image by digest in production.

FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# Scripts are skipped here only because src/ is not copied yet (npm ci's prepare compiles it);
# the build runs just after, so a change to src/ does not reinstall node_modules.
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build && npm prune --omit=dev --no-audit --no-fund

FROM node:20-bookworm-slim
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY bin ./bin
COPY proto ./proto
COPY package.json ./
# svcproxy on PATH, as npm's bin link would put it.
RUN ln -s /app/bin/svcproxy.js /usr/local/bin/svcproxy
# The node image's unprivileged user, by number so that Kubernetes' runAsNonRoot can verify it.
USER 1000:1000
# ingress 8080 (HTTP) and 8443 (TLS); sidecar 15006, its mTLS listener 15008 and outbound
# listener 15001; ratelimit 8081; the status (--status: /healthz, /ready) and metrics (--metrics)
# listeners 15021 and 15090. The admin (9901) stays on loopback. Each role binds only those its
# flags name.
EXPOSE 8080 8443 15001 15006 15008 8081 15021 15090
ENTRYPOINT ["svcproxy"]
CMD ["--help"]
