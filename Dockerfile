# verdict, CPU image: `verdict` as the entrypoint, for a SageMaker endpoint
# (SageMaker runs it with the argument `serve`: port 8080, /ping,
# /invocations, the model under /opt/ml/model), an SQS worker
# (`verdict worker …`) or the whole pipeline (`verdict up …`).
#
# Every RUN is a make target or a script that `make image-steps` runs here
# without Docker, and CI runs end to end (deploy/dockerfile_test.go checks
# that nothing else is called).
#
# CPU speed: the pinned llama.cpp is built for x86-64-v3 (AVX2, FMA, F16C:
# every x86 server since 2015), with ggml's CPU backend as a module the
# binary loads at start. Build for another target with
# --build-arg CPU_TARGET=x86-64-v4 (AVX-512) or native.

FROM golang:1.26.8-bookworm AS build
ARG CPU_TARGET=x86-64-v3
WORKDIR /src
COPY . .
RUN make image-deps
RUN make llama-src
RUN make dist DIST=/dist CPU_TARGET=${CPU_TARGET}

FROM debian:12.12-slim
COPY scripts/image/runtime-deps.sh /usr/local/lib/verdict/runtime-deps.sh
RUN /usr/local/lib/verdict/runtime-deps.sh
COPY --from=build /dist/ /opt/verdict/
RUN ["/opt/verdict/bin/verdict", "version"]
ENV PATH=/opt/verdict/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
USER 10001:10001
WORKDIR /var/lib/verdict
EXPOSE 8080
ENTRYPOINT ["verdict"]
CMD ["serve"]
