# The booking service. Build: docker build -t booking .
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --bin booking

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/booking /usr/local/bin/booking
ENV BOOKING_ADDR=0.0.0.0:8080
EXPOSE 8080
USER nobody
ENTRYPOINT ["/usr/local/bin/booking"]
CMD ["serve"]
