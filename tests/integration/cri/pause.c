/*
 * The CRI test's sandbox process: what a pod's infra container runs. It
 * holds the sandbox's namespaces, reaps what is reparented to it, and exits
 * 0 on SIGTERM or SIGINT (the runtime's StopPodSandbox). Built static, so
 * the image needs nothing else.
 */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void leave(int sig)
{
	(void)sig;
	_exit(0);
}

static void reap(int sig)
{
	(void)sig;
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

int main(void)
{
	struct sigaction stop = { .sa_handler = leave }, child = { .sa_handler = reap };

	if (getpid() != 1) {
		/* only meaningful as a container's first process */
		return 1;
	}
	sigaction(SIGINT, &stop, NULL);
	sigaction(SIGTERM, &stop, NULL);
	child.sa_flags = SA_NOCLDSTOP | SA_RESTART;
	sigaction(SIGCHLD, &child, NULL);
	for (;;)
		pause();
	return EXIT_SUCCESS;
}
