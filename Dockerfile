# The LifeStack environment server (python -m lifestack.serve), OpenEnv-compatible.
#   docker build -t lifestack-env .
#   docker run --rm -p 8000:8000 lifestack-env
# Only the serve extra is installed: no torch, no trainer.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY lifestack ./lifestack
RUN pip install ".[serve]" && useradd --create-home --uid 1000 lifestack
USER lifestack

EXPOSE 8000
# Beyond a network of your own, require a token: docker run -e LIFESTACK_SERVE_TOKEN=<secret> ...
# (every endpoint but /health then needs "Authorization: Bearer <secret>"; docs/serve.md)
HEALTHCHECK --interval=30s --timeout=3s --start-period=10s \
  CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/health', timeout=2)"
CMD ["python", "-m", "lifestack.serve", "--host", "0.0.0.0", "--port", "8000"]
