/* Warnings, through the handler the application sets (cltensor/status.h). */
#include "warning.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static clt_warning_handler handler;
static void *handler_user;

void clt_set_warning_handler(clt_warning_handler fn, void *user)
{
    pthread_mutex_lock(&lock);
    handler = fn;
    handler_user = user;
    pthread_mutex_unlock(&lock);
}

void clt__warn(const char *fmt, ...)
{
    pthread_mutex_lock(&lock);
    clt_warning_handler fn = handler;
    void *user = handler_user;
    pthread_mutex_unlock(&lock);
    if (!fn) return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fn(line, user);
}
