// A TCP proxy that delays every byte by a fixed one-way latency in each direction, so that a
// benchmark on loopback can show what a network round trip costs each lock (the LAN case).
// Linux's netem would do this in the kernel, but the machines this project runs on have no qdisc
// modules; Node's timers resolve only milliseconds. This uses epoll and a timerfd (nanoseconds),
// holds no thread and spins on nothing: the proxy costs a copy per chunk and a wake-up per due time.
//
//   latency-proxy LISTEN_PORT TARGET_PORT ONE_WAY_MICROSECONDS
// Listens on 127.0.0.1:LISTEN_PORT (0: any free port), forwards to 127.0.0.1:TARGET_PORT, prints
// "listening PORT" on stdout once it accepts, and runs until killed. Order within a direction is
// kept: the delay is constant, so chunks fall due in the order they came.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define MAX_PIPES 256
#define CHUNK 65536

struct chunk {
  uint64_t due;
  size_t len, off;
  int eof; // a shutdown(SHUT_WR) to pass on once the data before it is written
  struct chunk *next;
  char data[];
};

// One direction: bytes read from `from` wait in the queue, then go to `to`.
struct pipe {
  int from, to;
  struct chunk *head, *tail;
  int used;
  int eof_sent; // `to` was shut for writing: nothing more comes this way
  struct pipe *peer;
};

static struct pipe pipes[MAX_PIPES];
static uint64_t delay_ns;
static int ep, tfd;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void arm(void) {
  uint64_t earliest = 0;
  for (int i = 0; i < MAX_PIPES; i++)
    if (pipes[i].used && pipes[i].head && (!earliest || pipes[i].head->due < earliest)) earliest = pipes[i].head->due;
  struct itimerspec its = {0};
  if (earliest) {
    its.it_value.tv_sec = (time_t)(earliest / 1000000000u);
    its.it_value.tv_nsec = (long)(earliest % 1000000000u);
    if (!its.it_value.tv_sec && !its.it_value.tv_nsec) its.it_value.tv_nsec = 1;
  }
  timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

static void release(struct pipe *x) {
  while (x->head) {
    struct chunk *c = x->head;
    x->head = c->next;
    free(c);
  }
  x->tail = NULL;
  x->used = 0;
}

// Ends both directions of a connection: closing the two sockets also takes them out of epoll.
static void drop(struct pipe *p) {
  if (!p->used) return;
  release(p);
  release(p->peer);
  close(p->from);
  close(p->to);
}

static void enqueue(struct pipe *p, const char *data, size_t len, int eof) {
  struct chunk *c = malloc(sizeof *c + len);
  if (!c) exit(1);
  c->due = now_ns() + delay_ns;
  c->len = len;
  c->off = 0;
  c->eof = eof;
  c->next = NULL;
  if (len) memcpy(c->data, data, len);
  if (p->tail) p->tail->next = c;
  else p->head = c;
  p->tail = c;
}

// Writes what is due; on a full socket buffer, waits for EPOLLOUT on `to` (a rare case here).
static void flush(struct pipe *p) {
  uint64_t now = now_ns();
  while (p->used && p->head && p->head->due <= now) {
    struct chunk *c = p->head;
    if (c->eof) {
      shutdown(p->to, SHUT_WR);
      p->eof_sent = 1;
      if (p->peer->eof_sent) {
        drop(p);
        return;
      }
    } else {
      while (c->off < c->len) {
        ssize_t n = write(p->to, c->data + c->off, c->len - c->off);
        if (n > 0) {
          c->off += (size_t)n;
          continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
          // p->to is the socket p->peer reads (registered under it), unless it was removed at its EOF.
          struct epoll_event ev = {.events = (p->peer->eof_sent ? 0 : EPOLLIN) | EPOLLOUT, .data.ptr = p->peer};
          if (epoll_ctl(ep, EPOLL_CTL_MOD, p->to, &ev)) epoll_ctl(ep, EPOLL_CTL_ADD, p->to, &ev);
          return;
        }
        drop(p);
        return;
      }
    }
    p->head = c->next;
    if (!p->head) p->tail = NULL;
    free(c);
  }
}

// Two free slots for a new connection's directions, or 0 when the table is full.
static int free_pair(struct pipe **up, struct pipe **down) {
  *up = *down = NULL;
  for (int i = 0; i < MAX_PIPES && !*down; i++)
    if (!pipes[i].used) {
      if (!*up) *up = &pipes[i];
      else *down = &pipes[i];
    }
  return *down != NULL;
}

static void nonblocking_nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  int flags = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: latency-proxy LISTEN_PORT TARGET_PORT ONE_WAY_MICROSECONDS\n");
    return 2;
  }
  int listen_port = atoi(argv[1]), target_port = atoi(argv[2]);
  delay_ns = (uint64_t)strtoull(argv[3], NULL, 10) * 1000u;
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)listen_port)};
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(ls, (struct sockaddr *)&addr, sizeof addr) || listen(ls, 128)) {
    perror("listen");
    return 1;
  }
  socklen_t alen = sizeof addr;
  getsockname(ls, (struct sockaddr *)&addr, &alen);
  printf("listening %d\n", ntohs(addr.sin_port));
  fflush(stdout);
  ep = epoll_create1(0);
  tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
  epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
  ev.data.ptr = &tfd;
  epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &ev);
  static char buf[CHUNK];
  struct epoll_event events[64];
  for (;;) {
    int n = epoll_wait(ep, events, 64, -1);
    if (n < 0 && errno == EINTR) continue;
    for (int i = 0; i < n; i++) {
      void *tag = events[i].data.ptr;
      if (tag == NULL) {
        int c = accept(ls, NULL, NULL);
        if (c < 0) continue;
        int s = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)target_port)};
        to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        struct pipe *up, *down;
        if (!free_pair(&up, &down) || connect(s, (struct sockaddr *)&to, sizeof to)) {
          close(c);
          close(s);
          continue;
        }
        nonblocking_nodelay(c);
        nonblocking_nodelay(s);
        *up = (struct pipe){.from = c, .to = s, .used = 1, .peer = down};
        *down = (struct pipe){.from = s, .to = c, .used = 1, .peer = up};
        struct epoll_event e1 = {.events = EPOLLIN, .data.ptr = up};
        struct epoll_event e2 = {.events = EPOLLIN, .data.ptr = down};
        epoll_ctl(ep, EPOLL_CTL_ADD, c, &e1);
        epoll_ctl(ep, EPOLL_CTL_ADD, s, &e2);
      } else if (tag == &tfd) {
        uint64_t expirations;
        while (read(tfd, &expirations, sizeof expirations) > 0) {
        }
        for (int k = 0; k < MAX_PIPES; k++)
          if (pipes[k].used) flush(&pipes[k]);
      } else {
        struct pipe *p = tag;
        if (!p->used) continue;
        if (events[i].events & EPOLLOUT) {
          // `p` reads the socket that its peer writes to: the peer's queue may go on.
          struct epoll_event e = {.events = EPOLLIN, .data.ptr = p};
          epoll_ctl(ep, EPOLL_CTL_MOD, p->from, &e);
          flush(p->peer);
          if (!p->used) continue;
        }
        if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
          ssize_t r = read(p->from, buf, sizeof buf);
          if (r > 0) enqueue(p, buf, (size_t)r, 0);
          else if (r == 0) {
            // Level-triggered: a socket at EOF stays readable, so it leaves the set.
            enqueue(p, NULL, 0, 1);
            epoll_ctl(ep, EPOLL_CTL_DEL, p->from, NULL);
          } else if (errno != EAGAIN && errno != EWOULDBLOCK) drop(p);
        }
      }
    }
    arm();
  }
}
