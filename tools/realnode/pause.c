/* pause: the sandbox ("pause") container of a real node's pods (tools/realnode).
 * It holds the pod's namespaces open and does nothing else: sleeps until
 * SIGINT or SIGTERM (then exits 0), and reaps any child handed to it as the
 * pod's init. Built with `gcc -static` so its image needs no libc; the
 * harness packs it into an OCI image and imports it into the node's
 * containerd, so no image is ever pulled. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_stop(int sig) {
  (void)sig;
  _exit(0);
}

static void on_child(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(void) {
  struct sigaction stop = {.sa_handler = on_stop};
  struct sigaction child = {.sa_handler = on_child, .sa_flags = SA_NOCLDSTOP};
  if (sigaction(SIGINT, &stop, NULL) != 0 || sigaction(SIGTERM, &stop, NULL) != 0 ||
      sigaction(SIGCHLD, &child, NULL) != 0) {
    return 1;
  }
  for (;;) pause();
}
