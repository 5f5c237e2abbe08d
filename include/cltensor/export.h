/* CLT_API marks the functions of the public API. The library is built with
 * hidden visibility, so these are the only symbols libcltensor.so exports;
 * everything internal (clt__*) stays inside it. */
#ifndef CLTENSOR_EXPORT_H
#define CLTENSOR_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define CLT_API __attribute__((visibility("default")))
#else
#define CLT_API
#endif

#endif
