/* check_fault.c - the fault matrix: a real chipd with sim chips, hit by
 * one fault per tcase. Each row checks that nothing hangs (every wait bounded, and
 * CK_DEFAULT_TIMEOUT over the tcase), that the right error reaches the right client,
 * that every admitted request ends exactly once, that the counters agree with what
 * the clients saw, and that no region or process is left behind. docs/reliability.md
 * has the matrix with each row's result. */
#include "fault.h"

int main(void)
{
	Suite *s = suite_create("fault");
	int rc;

	ft_set_owner();
	ft_add_worker_cases(s);
	ft_add_client_cases(s);
	ft_add_message_cases(s);
	rc = tu_run(s);
	ft_cleanup();
	return rc;
}
